"""Interoperability with real vLLM 0.32 (CPU): both directions of the engine-core protocol.

1. The simulator is a faithful engine: vLLM's own Python frontend, started with no local engine,
   completes the handshake with it and serves from it.
2. greenfront is a faithful frontend: a real ``vllm serve --headless`` engine joins a standalone
   greenfront and greedy output is exactly what vLLM's own frontend returns (text-parity §6.4).

Runs where the peers are installed (``PEERS=/tmp/peers bash ../shared/vllm-peers/setup.sh``);
skipped elsewhere.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import openai
import pytest
import requests

from tests.integration.harness import ROOT, GreenfrontServer, free_port

PEERS = os.environ.get("PEERS", "/tmp/peers")
SCRIPTS = os.path.join(os.path.dirname(ROOT), "shared", "vllm-peers")
RUN_FRONTEND = os.path.join(SCRIPTS, "run-python-frontend-external.sh")
RUN_ENGINE = os.path.join(SCRIPTS, "run-headless-engine.sh")

pytestmark = pytest.mark.skipif(
    not (os.path.exists(os.path.join(PEERS, "vllm-venv", "bin", "vllm"))
         and os.path.exists(os.path.join(PEERS, "tiny-model", ".complete"))
         and os.path.exists(RUN_FRONTEND)),
    reason="vLLM peers not installed (PEERS=/tmp/peers bash ../shared/vllm-peers/setup.sh)")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def vllm_frontend(tmp_path_factory):
    port, rpc_port = free_port(), free_port()
    logs = tmp_path_factory.mktemp("vllm-frontend")
    env = dict(os.environ, PEERS=PEERS)
    frontend = subprocess.Popen(["bash", RUN_FRONTEND, str(port), str(rpc_port)], env=env,
                                stdout=open(logs / "frontend.log", "wb"),
                                stderr=subprocess.STDOUT, start_new_session=True)
    # Give the frontend time to bind its handshake socket before the engine knocks (ZMQ would
    # retry anyway; this only keeps the logs tidy).
    time.sleep(5)
    engine = subprocess.Popen(
        [sys.executable, "-m", "engine.sim", "--handshake", f"tcp://127.0.0.1:{rpc_port}",
         "--max-model-len", "2048", "--output-mode", "echo"],
        cwd=ROOT, stdout=open(logs / "sim.log", "wb"), stderr=subprocess.STDOUT,
        start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            if frontend.poll() is not None:
                pytest.fail("vLLM frontend exited:\n" + (logs / "frontend.log").read_text()[-5000:])
            try:
                if requests.get(url + "/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(1)
        else:
            pytest.fail("vLLM frontend never became healthy:\n"
                        + (logs / "frontend.log").read_text()[-5000:])
        yield url
    finally:
        _stop(frontend)
        _stop(engine)


def test_vllm_python_frontend_completes_from_the_simulator(vllm_frontend):
    client = openai.OpenAI(base_url=vllm_frontend + "/v1", api_key="x", max_retries=0)
    out = client.completions.create(model="tiny", prompt="The capital of France is",
                                    max_tokens=5, temperature=0)
    assert out.choices[0].text == "The capital of France is"
    assert out.choices[0].finish_reason == "length"


def test_vllm_python_frontend_streams_a_chat_from_the_simulator(vllm_frontend):
    client = openai.OpenAI(base_url=vllm_frontend + "/v1", api_key="x", max_retries=0)
    chunks = list(client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=4,
        temperature=0, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Say hi"
    assert chunks[-1].choices[0].finish_reason == "length"


@pytest.fixture(scope="module")
def greenfront_with_vllm_engine(tmp_path_factory):
    rpc_port = free_port()
    logs = tmp_path_factory.mktemp("vllm-engine")
    server = GreenfrontServer(os.path.join(PEERS, "tiny-model"), env={
        "GREENFRONT_ENGINE": "external",
        "GREENFRONT_HANDSHAKE_ADDRESS": f"tcp://127.0.0.1:{rpc_port}"})
    engine = subprocess.Popen(["bash", RUN_ENGINE, str(rpc_port)], env=dict(os.environ, PEERS=PEERS),
                              stdout=open(logs / "engine.log", "wb"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        server.start(timeout=240)
        yield server
    finally:
        server.stop()
        _stop(engine)


def test_real_vllm_engine_behind_greenfront_gives_vllms_greedy_text(greenfront_with_vllm_engine):
    client = openai.OpenAI(base_url=greenfront_with_vllm_engine.url + "/v1", api_key="x",
                           max_retries=0)
    out = client.completions.create(model="tiny", prompt="The capital of France is",
                                    max_tokens=8, temperature=0)
    # The bytes vLLM 0.32's own frontend returned for this request on this model.
    assert out.choices[0].text == ":** нельзя bernKey Execut\ufffdKey Execut"
    assert out.usage.prompt_tokens == 6 and out.usage.completion_tokens == 8
    chat = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=8,
        temperature=0, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in chat if c.choices)
    assert text == "եյিযipleÜberർinomború Literatura"
