"""Isolation, cancellation and engine death, shown as behaviour (never as timings)."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
import requests

from tests.support.processes import free_port_block
from tests.integration.harness import ROOT, GreenfrontServer, wait_for
from tests.support.raw_http import open_stream


@pytest.mark.deployment(env={"GREENFRONT_TOKENIZER_BACKEND": "hf"})
def test_health_answers_while_a_huge_tokenize_is_worked_on(fresh_server):
    # The HF backend makes a multi-megabyte prompt take seconds in the pool; /health must keep
    # answering meanwhile, because only the pool thread is busy.
    srv = fresh_server
    prompt = ("The quick brown fox jumps over the lazy dog. Zwölf Boxkämpfer jagen Viktor. "
              "1234567890 ") * 40000  # ~3.4 MB
    result = {}

    def tokenize():
        r = requests.post(srv.url + "/tokenize", json={"prompt": prompt}, timeout=120)
        result["status"] = r.status_code
        result["count"] = r.json().get("count")
        result["done_at"] = time.monotonic()

    worker = threading.Thread(target=tokenize)
    worker.start()
    answered_during = 0
    while worker.is_alive():
        r = requests.get(srv.url + "/health", timeout=30)
        if worker.is_alive() and r.status_code == 200:
            answered_during += 1
    worker.join()
    assert result["status"] == 200 and result["count"] > 100000
    assert answered_during >= 3, f"/health answered only {answered_during} times during tokenize"


@pytest.mark.deployment(sim_args="--output-mode random --itl-ms 20 --verbose")
def test_client_disconnect_aborts_the_engine_request(fresh_server):
    srv = fresh_server
    sock = open_stream(srv.url, {"prompt": "Hello", "max_tokens": 4000, "stream": True,
                                 "ignore_eos": True}, timeout=30)
    assert requests.get(srv.url + "/load", timeout=10).json()["server_load"] == 1
    sock.close()
    assert wait_for(lambda: requests.get(srv.url + "/load", timeout=10).json()
                     ["server_load"] == 0)
    # The simulator (--verbose) logs every ABORT it receives with how many ids were still live.
    assert wait_for(lambda: re.search(r"ABORT \['cmpl-[0-9a-f]+(-\d+)?-[0-9a-f]{8}'\] \(1 live\)",
                                       srv.log())), srv.log()
    assert requests.get(srv.url + "/health", timeout=10).status_code == 200


@pytest.mark.deployment(sim_args="--output-mode random --itl-ms 3")
def test_many_clients_leaving_mid_stream_leave_nothing_in_flight(fresh_server):
    # Streams on the direct write (parked after their first chunk) whose clients go, half by
    # a close and half by a reset, while outputs that render nothing keep coming
    # (``stream_interval`` holds every token after the first): every response ends. The race
    # in which such an output and the disconnect meet in one turn of the hub is pinned down in
    # tests/unit/resources/test_direct_write.py; this load does not reliably hit it.
    srv = fresh_server
    body = {"prompt": "Hello", "max_tokens": 4000, "stream": True, "ignore_eos": True,
            "stream_interval": 100000}
    socks = [open_stream(srv.url, body, timeout=60) for _ in range(120)]
    assert requests.get(srv.url + "/load", timeout=10).json()["server_load"] == 120
    for i, sock in enumerate(socks):
        if i % 2:  # a reset rather than a close for half of them
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    assert wait_for(lambda: requests.get(srv.url + "/load", timeout=10).json()
                    ["server_load"] == 0, timeout=30), requests.get(srv.url + "/load").text
    assert requests.get(srv.url + "/health", timeout=10).status_code == 200


@pytest.mark.deployment(sim_args="--output-mode random --itl-ms 20")
def test_killed_engine_ends_the_stream_with_an_error_and_health_turns_503(fresh_server):
    srv = fresh_server
    sock = open_stream(srv.url, {"prompt": "Hello", "max_tokens": 4000, "stream": True,
                                 "ignore_eos": True}, timeout=30)
    for pid in srv.engine_pids():
        os.kill(pid, signal.SIGKILL)
    sock.settimeout(30)
    received = b""
    while not received.endswith(b"data: [DONE]\n\n") and b"0\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    sock.close()
    assert b'"error"' in received, received[-500:]
    assert wait_for(lambda: requests.get(srv.url + "/health", timeout=10).status_code == 503)
    r = requests.post(srv.url + "/v1/completions", json={"prompt": "hi"}, timeout=10)
    assert r.status_code == 503
    assert r.json()["error"]["code"] == 503


@pytest.mark.deployment(sim_args="--output-mode random --itl-ms 10 --die-after 1")
def test_engine_core_dead_message_fails_requests(fresh_server):
    srv = fresh_server
    r = requests.post(srv.url + "/v1/completions",
                      json={"prompt": "Hello", "max_tokens": 1000, "ignore_eos": True},
                      timeout=30)
    assert r.status_code in (500, 503), r.text
    assert "error" in r.json()
    assert wait_for(lambda: requests.get(srv.url + "/health", timeout=10).status_code == 503)


@pytest.mark.deployment(workers=2, sim_args="--output-mode echo --itl-ms 2")
def test_two_workers_and_a_restarted_worker_reconnects(fresh_server):
    srv = fresh_server
    body = {"prompt": "Hello world", "max_tokens": 2, "temperature": 0}
    for _ in range(8):
        r = requests.post(srv.url + "/v1/completions", json=body, timeout=30)
        assert r.status_code == 200 and r.json()["choices"][0]["text"] == "Hello world"
    victim = srv.worker_pids()[0]
    os.kill(victim, signal.SIGKILL)
    assert wait_for(lambda: len(srv.worker_pids()) == 2 and victim not in srv.worker_pids())
    ok = 0
    deadline = time.time() + 30
    while ok < 8 and time.time() < deadline:
        try:
            r = requests.post(srv.url + "/v1/completions", json=body, timeout=30)
        except requests.RequestException:
            continue
        if r.status_code == 200 and r.json()["choices"][0]["text"] == "Hello world":
            ok += 1
    assert ok == 8, srv.log()


def test_a_worker_accepts_connections_only_once_its_engine_registered(model_dir, tmp_path):
    # No engine at first: a /health sent now waits in the listen backlog instead of getting the
    # 503 a worker without engines would answer; it is answered 200 once the engine joins.
    handshake = f"tcp://127.0.0.1:{free_port_block(3)}"  # + the worker's 2 ports
    srv = GreenfrontServer(model_dir, env={"GREENFRONT_ENGINE": "external",
                                           "GREENFRONT_ACCEPT_WAIT": "120",
                                           "GREENFRONT_HANDSHAKE_ADDRESS": handshake}).launch()
    engine = None
    try:
        answers: list = []

        def probe():
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    answers.append(requests.get(srv.url + "/health", timeout=60).status_code)
                    return
                except requests.ConnectionError:
                    time.sleep(0.05)  # not even listening yet
        prober = threading.Thread(target=probe)
        prober.start()
        assert wait_for(lambda: "waiting for 1 external engine" in srv.log())
        time.sleep(1.0)
        assert not answers
        engine = subprocess.Popen([sys.executable, "-m", "engine.sim", "--handshake", handshake],
                                  cwd=ROOT)
        prober.join(90)
        assert answers == [200], srv.log()
    finally:
        srv.stop_later()
        if engine is not None:
            engine.kill()
            engine.wait()


def test_an_engine_error_is_a_500_and_the_worker_lives_on(server):
    workers = server.worker_pids()
    # (Token ids beyond 32 bits used to crash the pool thread here; they get vLLM's 400 now.)
    r = requests.post(server.url + "/v1/completions", timeout=10, json={
        "prompt": "hi", "max_tokens": 4, "vllm_xargs": {"sim_error_after": 1}})
    assert r.status_code == 500
    assert r.json()["error"]["type"] == "InternalServerError"
    r = requests.post(server.url + "/detokenize", json={"tokens": [1, 22177, 4304]}, timeout=10)
    assert r.json() == {"prompt": "<s>Hello world"}
    assert server.worker_pids() == workers


@pytest.mark.deployment(wait_healthy=False, env={
    "GREENFRONT_ENGINE": "external", "GREENFRONT_ACCEPT_WAIT": "0",
    "GREENFRONT_HANDSHAKE_ADDRESS": "tcp://127.0.0.1:1"})
def test_before_any_engine_registers_health_is_503_and_requests_get_503(fresh_server):
    srv = fresh_server
    assert requests.get(srv.url + "/health", timeout=10).status_code == 503
    r = requests.post(srv.url + "/v1/completions", json={"prompt": "hi"}, timeout=10)
    assert r.status_code == 503
    assert "not registered" in r.json()["error"]["message"]
