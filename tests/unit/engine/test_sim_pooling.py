"""engine.sim as a pooling engine (``--runner pooling``), driven over real ZMQ sockets: the tasks
it reports, and a generation request being fatal to it as to vLLM 0.32's engine core."""
from __future__ import annotations

from typing import Any

from engine.protocol import ENGINE_CORE_DEAD
from tests.support.sim_driver import FAST
from tests.support.sim_driver import start, workdir  # noqa: F401  (fixtures)


def test_supported_tasks_are_a_real_pooling_engines(start: Any) -> None:
    assert start(*FAST, "--runner", "pooling").call("get_supported_tasks").value == [
        "token_embed", "embed"]
    assert start(*FAST, "--runner", "pooling", "--convert", "classify").call(
        "get_supported_tasks").value == ["classify", "token_classify"]


def test_a_generation_request_kills_a_pooling_engine(start: Any) -> None:
    sim = start(*FAST, "--runner", "pooling")
    sim.add("gen-1", max_tokens=2)
    msg = sim.recv(5.0)
    assert msg is not None and msg[0] == [ENGINE_CORE_DEAD], sim.log()
    assert sim.proc.wait(10) == 1
