"""SIGTERM with vLLM's --shutdown-timeout semantics (GREENFRONT_SHUTDOWN_TIMEOUT standalone).

N > 0: new requests get 503 (on an open keep-alive connection too), in-flight ones finish within
N seconds, the rest are aborted with a clear error, exit 0. N = 0: in-flight requests are aborted
at once. In both modes /ready answers 503 from the drain's start. No child process (simulator,
handshake server) is left behind.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import threading

import pytest
import requests

from tests.support.processes import alive as _alive, tree
from tests.integration.harness import wait_for

#: A token every 100 ms (the simulator steps every 10 ms): 20 tokens take ~2 s, 400 take ~40 s.
SLOW = {"sim_itl_ms": 100, "sim_output_mode": "random"}


def _descendants(pid: int) -> list[int]:
    return tree(pid)[1:]


def _stream_error(events: list[str]) -> dict:
    """The error event of a stream that failed after its 200 (vLLM sends [DONE] after it)."""
    assert events[-1] == "[DONE]", events[-3:]
    return json.loads(events[-2])["error"]


def _body(max_tokens: int, stream: bool) -> dict:
    return {"model": "tiny", "prompt": "hello", "max_tokens": max_tokens, "stream": stream,
            "ignore_eos": True, "vllm_xargs": SLOW}


def _stream_in_background(url: str, max_tokens: int) -> tuple[threading.Thread, dict]:
    """Start a streamed completion; ``result`` gets its events once it ends."""
    result: dict = {"started": threading.Event()}

    def run() -> None:
        with requests.post(url + "/v1/completions", json=_body(max_tokens, True), stream=True,
                           timeout=120) as resp:
            result["status"] = resp.status_code
            events = []
            for line in resp.iter_lines():
                if line.startswith(b"data: "):
                    events.append(line[6:].decode())
                    result["started"].set()
            result["events"] = events
        result["started"].set()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def _post_in_background(url: str, max_tokens: int) -> tuple[threading.Thread, dict]:
    result: dict = {}

    def run() -> None:
        resp = requests.post(url + "/v1/completions", json=_body(max_tokens, False), timeout=120)
        result["status"], result["json"] = resp.status_code, resp.json()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def _in_flight(url: str, count: int) -> bool:
    return requests.get(url + "/load", timeout=5).json()["server_load"] >= count


@pytest.mark.deployment(workers=1, env={"GREENFRONT_SHUTDOWN_TIMEOUT": "4"})
def test_drain_finishes_in_flight_refuses_new_aborts_the_rest_and_exits_0(fresh_server):
    srv = fresh_server
    session = requests.Session()  # a keep-alive connection opened before SIGTERM
    assert session.get(srv.url + "/v1/models", timeout=10).status_code == 200
    short, short_result = _stream_in_background(srv.url, 20)       # ~2 s: finishes
    long_stream, long_result = _stream_in_background(srv.url, 400)  # ~40 s: aborted
    long_json, long_json_result = _post_in_background(srv.url, 400)
    assert short_result["started"].wait(30) and long_result["started"].wait(30)
    assert wait_for(lambda: _in_flight(srv.url, 3), timeout=30)
    children = _descendants(srv.proc.pid)
    assert children

    probe = requests.Session()  # another keep-alive connection, for the readiness probe
    assert probe.get(srv.url + "/ready", timeout=10).status_code == 200
    srv.proc.send_signal(signal.SIGTERM)
    # /ready fails as soon as the drain begins, while the requests in flight still run.
    _assert_ready_fails_while_draining(probe, srv.url)
    assert not short_result.get("events") and not long_result.get("events")
    # New work on the open connection is refused, with the connection closed after it.
    answers = []
    assert wait_for(lambda: answers.append(session.get(srv.url + "/v1/models", timeout=10))
                    or answers[-1].status_code != 200, timeout=20)
    refused = answers[-1]
    assert refused.status_code == 503, refused.text
    assert refused.headers.get("Connection", "").lower() == "close"
    assert "shutting down" in refused.json()["error"]["message"]

    short.join(60)
    assert short_result["status"] == 200 and short_result["events"][-1] == "[DONE]"
    assert json.loads(short_result["events"][-2])["choices"][0]["finish_reason"] == "length"
    long_stream.join(60)
    long_json.join(60)
    error = _stream_error(long_result["events"])
    assert error["code"] == 503 and "did not finish within the shutdown timeout" in \
        error["message"]
    assert long_json_result["status"] == 503
    assert "shutdown timeout (4s)" in long_json_result["json"]["error"]["message"]
    assert srv.proc.wait(30) == 0
    assert not [pid for pid in children if _alive(pid)], srv.log()


def _assert_ready_fails_while_draining(probe: requests.Session, url: str) -> None:
    """Poll /ready on an open connection until it stops answering 200: it must answer 503
    (draining) before the connection goes."""
    answers = []
    assert wait_for(lambda: answers.append(probe.get(url + "/ready", timeout=10))
                    or answers[-1].status_code != 200, timeout=20)
    assert answers[-1].status_code == 503, answers[-1].text
    assert "draining" in answers[-1].text


@pytest.mark.deployment(workers=1)
def test_ready_fails_during_a_drain_with_shutdown_timeout_0(fresh_server):
    """Timeout 0 aborts the engine requests at once, but the drain still waits (up to
    ``runtime.shutdown.ANSWER_WAIT``) for the requests in flight to be answered: a /tokenize of
    a prompt that takes seconds keeps it open long enough to see /ready answer 503."""
    srv = fresh_server
    stream, stream_result = _stream_in_background(srv.url, 400)
    assert stream_result["started"].wait(60)
    probe = requests.Session()
    assert probe.get(srv.url + "/ready", timeout=10).status_code == 200
    body = json.dumps({"prompt": "hello world, this is a test. " * 1_200_000}).encode()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=60) as big:
        # sendall returns once the worker has read all but the sockets' buffers of the ~35 MB
        # body: the request is in flight before SIGTERM.
        big.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body) + body)
        srv.proc.send_signal(signal.SIGTERM)
        _assert_ready_fails_while_draining(probe, srv.url)
    stream.join(60)
    assert "shutdown timeout 0" in _stream_error(stream_result["events"])["message"]
    assert srv.proc.wait(30) == 0


@pytest.mark.deployment(workers=2)  # GREENFRONT_SHUTDOWN_TIMEOUT unset: vLLM's default 0
def test_shutdown_timeout_0_aborts_at_once_and_exits(fresh_server):
    srv = fresh_server
    streams = [_stream_in_background(srv.url, 400) for _ in range(2)]  # would take ~40 s
    assert all(result["started"].wait(90) for _, result in streams)
    children = _descendants(srv.proc.pid)
    srv.proc.send_signal(signal.SIGTERM)
    for thread, result in streams:
        thread.join(60)
        error = _stream_error(result["events"])
        assert error["code"] == 503 and "shutdown timeout 0" in error["message"]
    assert srv.proc.wait(20) == 0
    assert not [pid for pid in children if _alive(pid)], srv.log()


@pytest.mark.deployment(workers=1)
def test_a_killed_master_leaves_no_child(fresh_server):
    srv = fresh_server
    children = _descendants(srv.proc.pid)
    assert len(children) >= 3  # worker, handshake server, simulator
    os.kill(srv.proc.pid, signal.SIGKILL)
    srv.proc.wait(10)
    assert wait_for(lambda: not [pid for pid in children if _alive(pid)], timeout=20), \
        [(pid, open(f"/proc/{pid}/cmdline").read()) for pid in children if _alive(pid)]
