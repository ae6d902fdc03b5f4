"""The simulator is a faithful engine: vLLM's own Python frontend serves from it.

vLLM's frontend is started with no local engine (``--data-parallel-size-local 0``) and binds the
handshake ROUTER; the simulator joins it exactly as ``vllm serve --headless`` would.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import openai
import pytest

from tests.integration.harness import ROOT, free_port
from tests.interop.peers import SERVE_ARGS, VllmProcess, requires_peers

pytestmark = requires_peers


@pytest.fixture(scope="module")
def vllm_frontend_on_simulator(tmp_path_factory):
    logs = tmp_path_factory.mktemp("vllm-on-sim")
    port, rpc_port = free_port(), free_port()
    frontend = VllmProcess(["--port", str(port)] + SERVE_ARGS + [
        "--disable-log-stats", "--data-parallel-size", "1", "--data-parallel-size-local", "0",
        "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", str(rpc_port)],
        str(logs / "frontend.log"), port=port)
    engine = subprocess.Popen(
        [sys.executable, "-m", "engine.sim", "--handshake", f"tcp://127.0.0.1:{rpc_port}",
         "--max-model-len", "2048", "--output-mode", "echo"],
        cwd=ROOT, stdout=open(logs / "sim.log", "wb"), stderr=subprocess.STDOUT,
        start_new_session=True)
    try:
        yield frontend.wait_healthy()
    finally:
        frontend.kill()
        os.killpg(engine.pid, signal.SIGKILL)
        engine.wait()


def test_vllm_python_frontend_completes_from_the_simulator(vllm_frontend_on_simulator):
    client = openai.OpenAI(base_url=vllm_frontend_on_simulator.url + "/v1", api_key="x",
                           max_retries=0)
    out = client.completions.create(model="tiny", prompt="The capital of France is",
                                    max_tokens=5, temperature=0)
    assert out.choices[0].text == "The capital of France is"
    assert out.choices[0].finish_reason == "length"


def test_vllm_python_frontend_streams_a_chat_from_the_simulator(vllm_frontend_on_simulator):
    client = openai.OpenAI(base_url=vllm_frontend_on_simulator.url + "/v1", api_key="x",
                           max_retries=0)
    chunks = list(client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=4,
        temperature=0, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Say hi"
    assert chunks[-1].choices[0].finish_reason == "length"
