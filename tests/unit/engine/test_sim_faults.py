"""engine.sim as a real subprocess, driven over real ZMQ sockets the test binds
(``tests.support.sim_driver``): bad input, injected faults and signals, the other switches, and
the handshake mode."""

from __future__ import annotations

import signal
import time
from typing import Any

import msgspec
import pytest

from engine.protocol import ENGINE_CORE_DEAD, EngineZmqAddresses, decode_handshake_status, encode_init
from tests.support.sim_driver import FAST, tokens_of
from tests.support.sim_driver import start, workdir  # noqa: F401  (fixtures)


# ----------------------------------------------------------------- validation


def test_invalid_request_is_ignored(start: Any) -> None:
    sim = start(*FAST)
    sim.add("bad-1", temperature=5.0)
    sim.add("good-1", max_tokens=2)
    outs = sim.collect("good-1")
    assert [o.request_id for o, _, _ in outs] == ["good-1", "good-1"]
    assert "temperature must be in [0, 2], got 5.0" in sim.log()


def test_strict_input_thread_dies_like_a_real_engine(start: Any) -> None:
    sim = start(*FAST, "--strict-input-thread")
    sim.add("bad-1", temperature=5.0)
    assert sim.call("is_sleeping", timeout=0.5) is None
    assert sim.proc.poll() is None
    assert "input thread died" in sim.log()


# --------------------------------------------------------------------- faults


def test_die_after_sends_engine_core_dead(start: Any) -> None:
    sim = start(*FAST, "--die-after", "1")
    sim.add("die-1", max_tokens=50)
    seen = []
    while True:
        msg = sim.recv(5.0)
        assert msg is not None, sim.log()
        frames, outs = msg
        if outs is None:
            assert frames == [ENGINE_CORE_DEAD]
            break
        seen += [o.request_id for o in outs.outputs]
    assert seen == ["die-1"]
    assert sim.proc.wait(10) == 1


def test_stall_after_goes_silent(start: Any) -> None:
    sim = start(*FAST, "--stall-after", "1")
    sim.add("st-1", max_tokens=2)
    assert len(sim.collect("st-1")) == 2
    sim.add("st-2", max_tokens=2)
    assert sim.call("is_sleeping", timeout=0.5) is None
    assert sim.recv(0.2) is None
    assert sim.proc.poll() is None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_exits_zero_quietly(start: Any, signum: int) -> None:
    sim = start(*FAST)
    sim.add("term-1", max_tokens=10000)
    assert sim.recv(2.0) is not None
    sim.proc.send_signal(signum)
    assert sim.proc.wait(5) == 0
    while (msg := sim.recv(0.1)) is not None:  # drain what was sent before the signal
        assert msg[1] is not None
    assert "Traceback" not in sim.log()


# ------------------------------------------------------------- other switches


def test_disable_log_stats(start: Any) -> None:
    sim = start(*FAST, "--disable-log-stats")
    sim.add("ns-1", max_tokens=2)
    outs = sim.collect("ns-1")
    assert all(msg.scheduler_stats is None for _, _, msg in outs)
    assert outs[0][0].events is None and outs[0][0].prefill_stats is not None
    assert sim.recv(0.2) is None  # no stats-only message either


def test_vllm_033_shape_and_second_client(start: Any) -> None:
    sim = start(*FAST, "--vllm-version", "0.33.0", outputs=2)
    sim.add("c1", max_tokens=1, client_index=1)
    (out, frames, _), = sim.collect("c1", client=1)
    assert len(msgspec.msgpack.decode(frames[0])[1][0]) == 19
    assert sim.call("pause_generation", "keep", False).result == [None, None]
    assert sim.call("resume_scheduler").result == [None, None]


def test_per_request_timing_knobs(start: Any) -> None:
    sim = start("--itl-ms", "5", "--ttft-ms", "5", "--output-mode", "echo")
    t0 = time.monotonic()
    sim.add("slow-1", max_tokens=3, extra_args={"sim_ttft_ms": 150, "sim_itl_ms": 50})
    assert tokens_of(sim.collect("slow-1")) == [501, 502, 503]
    # First token after >= 150 ms, then one every ~10 steps of 5 ms.
    assert time.monotonic() - t0 >= 0.15 + 2 * 0.045


# -------------------------------------------------------------------- handshake


def test_handshake_mode(start: Any) -> None:
    sim = start(*FAST, handshake=True)
    assert sim.hs.poll(10000), sim.log()
    identity, payload = sim.hs.recv_multipart()
    hello = decode_handshake_status(payload)
    assert identity == b"\x00\x00" and (hello.status, hello.local, hello.headless) == ("HELLO", False, True)
    sim.hs.send_multipart([identity, encode_init(EngineZmqAddresses([sim.input_addr], sim.output_addrs))])
    reg = sim.wait_registration()
    assert reg.data_parallel_rank == 0
    assert sim.hs.poll(5000)
    _, payload = sim.hs.recv_multipart()
    ready = decode_handshake_status(payload)
    assert (ready.status, ready.local, ready.headless) == ("READY", False, True)
    # What vLLM's Python frontend does right after READY.
    assert sim.call("reset_mm_cache").result == [None, None]
    assert sim.call("get_supported_tasks").value == ["generate"]
    sim.add("hs-1", max_tokens=2)
    assert tokens_of(sim.collect("hs-1")) == [501, 502]
