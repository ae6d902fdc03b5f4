"""vLLM 0.33 engines: greenfront beside vLLM 0.33's Rust frontend (docs/vllm-versions.md), both on
a simulator in 0.33 mode: ERROR outputs answered by their code (400, 503, 500, streamed and
not) and ``/kv_event_sources``, byte for byte.

The 0.33 binary comes from the ``vllm==0.33.0`` wheel (as ``interop/setup.sh`` takes 0.32's):
``$PEERS/rs033/vllm-rs``; without it these tests skip.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import requests

from tests.integration.harness import ROOT, GreenfrontServer
from tests.interop.peers import MODEL, requires_peers
from tests.support.processes import free_port, reap, wait_healthy
from tests.support.vllm_peers import PEERS, external_frontend

RS033 = os.path.join(PEERS, "rs033", "vllm-rs")
SIM = ["--max-model-len", "2048", "--vllm-version", "0.33.0", "--output-mode", "echo",
       "--kv-events-endpoint", "tcp://*:5557"]

pytestmark = [requires_peers, pytest.mark.skipif(not os.path.exists(RS033),
                                                 reason="no vLLM 0.33 Rust frontend")]


@pytest.fixture(scope="module")
def rust(tmp_path_factory):
    port, rpc = free_port(), free_port()
    argv, env = external_frontend("rust", port, rpc, model=MODEL, frontend_bin=RS033)
    log_path = os.path.join(str(tmp_path_factory.mktemp("rs033")), "rs.log")
    log = open(log_path, "wb")
    fe = subprocess.Popen(argv, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                          start_new_session=True)
    sim = subprocess.Popen([sys.executable, "-m", "engine.sim", "--handshake",
                            f"tcp://127.0.0.1:{rpc}", *SIM], cwd=ROOT, stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", fe, 120,
                     lambda: open(log_path).read()[-3000:], name="vllm-rs 0.33")
        yield f"http://127.0.0.1:{port}"
    finally:
        reap(fe, grace=2)
        reap(sim, grace=0)
        log.close()


@pytest.fixture(scope="module")
def greenfront():
    with GreenfrontServer(MODEL, sim_args=" ".join(SIM[2:]),
                          env={"GREENFRONT_SYSTEM_FINGERPRINT": ""}) as server:
        yield server.url


def _answer(url: str, code: str, stream: bool) -> tuple[int, object]:
    r = requests.post(url + "/v1/completions", timeout=30, json={
        "model": "tiny", "prompt": "Hello world", "max_tokens": 4, "stream": stream,
        "vllm_xargs": {"sim_error_after": 1 if stream else 0, "sim_error_code": code}})
    if not stream:
        return r.status_code, r.json()
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    errors = [json.loads(e) for e in events if e.startswith('{"error"')]
    return r.status_code, (errors, events[-1])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("code", ["validation_error", "engine_paused", "sim_error"])
def test_error_outputs_as_vllm_033(rust, greenfront, code, stream):
    assert _answer(greenfront, code, stream) == _answer(rust, code, stream)


def test_kv_event_sources_as_vllm_033(rust, greenfront):
    theirs = requests.get(rust + "/kv_event_sources", timeout=10).json()
    assert requests.get(greenfront + "/kv_event_sources", timeout=10).json() == theirs
    assert theirs["0"]["endpoint"] == "tcp://*:5557"
