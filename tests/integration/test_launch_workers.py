"""Two workers under ``vllm serve``'s one engine client: ``engine.relay`` between them.

The supervisor's part is played as in test_launch.py (inherited HTTP socket and engine
listeners, simulator engines pointed at them). Each worker must be a full engine client: it
serves requests on every DP engine, its utility calls are answered to it, its aborts reach the
engine, and a worker that gunicorn restarts serves again.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket

import pytest
import requests

from tests.support.processes import cmdline, process_children
from tests.integration.launch_harness import LaunchedFrontend
from tests.integration.harness import wait_for

KEY = "relay-test"
AUTH = {"Authorization": f"Bearer {KEY}"}
BODY = {"prompt": "Hello world", "max_tokens": 2}


@pytest.fixture(scope="module")
def relayed(model_dir):
    fe = LaunchedFrontend(model_dir, engines=2,
                          sim_args=["--output-mode", "echo", "--itl-ms", "5", "--verbose"],
                          args={"enable_log_requests": True, "api_key": [KEY]},
                          env={"GREENFRONT_WORKERS": "2", "VLLM_SERVER_DEV_MODE": "1"})
    try:
        yield fe.wait_healthy(timeout=180)
    finally:
        fe.stop()


def _serving_pids(fe: LaunchedFrontend) -> set[str]:
    return set(re.findall(r"\[(\d+)\] \[greenfront\.\w+\] Received request", fe.log()))


def _complete(fe: LaunchedFrontend, **headers: str) -> requests.Response:
    r = requests.post(fe.url + "/v1/completions", json=BODY, timeout=30,
                      headers=dict(AUTH, **headers))
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == "Hello world", r.text
    return r


def _adds(fe: LaunchedFrontend) -> list[tuple[str, int, str]]:
    """(rank, worker slot, client_index) of every ADD the engines logged; the slot is the
    request id's last two hex digits."""
    return [(rank, int(suffix[-2:], 16), client) for rank, suffix, client in re.findall(
        r"engine\.sim rank=(\d) ADD \S+-([0-9a-f]{8}) .* client=(\d+)", fe.log())]


def test_both_workers_serve_on_both_engines(relayed):
    # New connections go to whichever worker accepts first: send until both have served, and
    # each has used both engines.
    def spread() -> bool:
        _complete(relayed)
        pairs = {(rank, slot) for rank, slot, _ in _adds(relayed)}
        return len(_serving_pids(relayed)) == 2 and len(pairs) == 4
    assert wait_for(spread, timeout=120), relayed.log()
    # Every request names the engines' one output socket.
    assert {client for _, _, client in _adds(relayed)} == {"0"}
    _complete(relayed, **{"X-data-parallel-rank": "1", "X-Request-Id": "pinned-9"})
    assert re.search(r"engine\.sim rank=1 ADD cmpl-pinned-9", relayed.log())


def test_each_workers_utility_calls_are_answered_to_it(relayed):
    def answered_by_both_slots() -> bool:
        r = requests.get(relayed.url + "/is_sleeping", headers=AUTH, timeout=10)
        assert r.status_code == 200 and r.json() == {"is_sleeping": False}, r.text
        ids = re.findall(r"UTILITY is_sleeping\(\) call_id=(\d+)", relayed.log())
        return {int(i) % 2 for i in ids} == {0, 1}
    assert wait_for(answered_by_both_slots, timeout=60), relayed.log()


def test_a_disconnect_aborts_the_request_in_the_engine(relayed):
    payload = json.dumps({"prompt": "Hello", "max_tokens": 2000, "ignore_eos": True,
                          "stream": True}).encode()
    for _ in range(4):  # a few connections, so that both workers are likely among them
        sock = socket.create_connection(("127.0.0.1", relayed.port), timeout=30)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                     + KEY.encode() + b"\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
        received = b""
        while received.count(b"data: ") < 2:
            chunk = sock.recv(65536)
            assert chunk and received[:12] in (b"", b"HTTP/1.1 200"), received
            received += chunk
        sock.close()
    assert wait_for(lambda: len(re.findall(r"ABORT \[.*\] \(1 live\)", relayed.log())) == 4,
                    timeout=30), relayed.log()
    assert wait_for(lambda: requests.get(relayed.url + "/load", headers=AUTH, timeout=10).json()
                    == {"server_load": 0}, timeout=10)


def _workers(master: int) -> set[int]:
    return {p for p in process_children().get(master, ()) if "gunicorn" in cmdline(p)}


def test_a_restarted_worker_serves_again(relayed):
    # bin/greenfront execs gunicorn: the frontend's pid is the master; the relay is its child too.
    master = relayed.proc.pid
    workers = _workers(master)
    assert len(workers) == 2, workers
    killed = workers.pop()
    os.kill(killed, signal.SIGKILL)
    assert wait_for(lambda: len(_workers(master) - {killed}) == 2, timeout=30)
    fresh = {str(p) for p in _workers(master) - workers - {killed}}
    assert wait_for(lambda: _complete(relayed) and fresh <= _serving_pids(relayed),
                    timeout=60), relayed.log()
