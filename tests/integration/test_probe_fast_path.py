"""The probe fast path (middleware/probes.py): a healthy /health and a ready /ready answer exactly
what the full stack answers (status, headers, body; CORS and request ids included), are still
left out of the HTTP metrics, and every other case (405s, a dead engine's 503, the drain) is the
full stack's answer."""
from __future__ import annotations

import os
import re
import signal
import socket
import threading

import pytest
import requests

from tests.integration.harness import wait_for

OPTIONS = {"GREENFRONT_ENABLE_REQUEST_ID_HEADERS": "1",
           "GREENFRONT_ALLOWED_ORIGINS": '["http://a.example"]',
           "GREENFRONT_SHUTDOWN_TIMEOUT": "20",
           "GREENFRONT_KEEPALIVE": "60"}
#: (path, extra request headers): each variant the fast path answers.
PROBES = [("/health", b""), ("/health", b"Origin: http://a.example\r\n"),
          ("/health", b"Origin: http://other.example\r\nX-Request-Id: abc-1\r\n"),
          ("/health?probe=1", b"X-Request-Id: abc-2\r\n"),
          ("/ready", b"Origin: http://a.example\r\n")]


def _request(path: str, extra: bytes, method: bytes = b"GET", close: bool = True) -> bytes:
    connection = b"Connection: close\r\n" if close else b""
    return (method + b" " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + connection + extra
            + b"\r\n")


def _read_response(sock: socket.socket, head_only: bool = False) -> bytes:
    """One response (headers and its Content-Length body unless ``head_only``); Date and made
    request ids masked."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
    while not head_only and len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, head + body
        body += chunk
    head = re.sub(rb"Date: [^\r]*", b"Date: -", head)
    head = re.sub(rb"X-Request-Id: [0-9a-f]{32}\b", b"X-Request-Id: made", head)
    return head + b"\r\n\r\n" + body


def _answer(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        return _read_response(sock, head_only=request.startswith(b"HEAD "))


def _http_handlers(url: str) -> set[str]:
    text = requests.get(url + "/metrics", timeout=10).text
    return set(re.findall(r'http_requests_total\{handler="([^"]*)"', text))


@pytest.mark.deployment(workers=1, env=OPTIONS)
def test_probes_answer_as_the_full_stack_does_also_during_a_drain(fresh_server):
    srv = fresh_server
    before = [_answer(srv.port, _request(path, extra)) for path, extra in PROBES]
    assert all(answer.startswith(b"HTTP/1.1 200 OK\r\n") for answer in before), before
    assert b"Access-Control-Allow-Origin: http://a.example" in before[1]
    assert b"X-Request-Id: abc-1" in before[2] and b"X-Request-Id: made" in before[0]
    assert requests.get(srv.url + "/v1/models", timeout=10).status_code == 200
    # Counted as before: /v1/models is, the probes are not (as vLLM leaves them out).
    handlers = _http_handlers(srv.url)
    assert "/v1/models" in handlers and not {"/health", "/ready"} & handlers

    # Connections accepted before SIGTERM, one per probe (its first request answered), then a
    # request in flight that keeps the drain going while the probes are asked again.
    opened = [_accepted(srv.port) for _ in PROBES]
    ready_probes = [_accepted(srv.port) for _ in range(30)]
    threading.Thread(target=_slow_completion, args=(srv.url,), daemon=True).start()
    assert wait_for(lambda: requests.get(srv.url + "/load", timeout=5).json()["server_load"] >= 1,
                    timeout=30)
    srv.proc.send_signal(signal.SIGTERM)
    # The drain has begun once /ready says so (each try on a connection of its own: gunicorn
    # closes each after one answer once the worker stops).
    assert wait_for(lambda: _draining(ready_probes.pop()), timeout=20, interval=0.1)

    during = []
    for sock, (path, extra) in zip(opened, PROBES):
        with sock:
            sock.sendall(_request(path, extra))
            during.append(_read_response(sock))
    # /ready says 503 while draining; /health answers as the fast path did, through the drain.
    assert during[:-1] == before[:-1], (during, before)
    assert during[-1].startswith(b"HTTP/1.1 503")


def _slow_completion(url: str) -> None:
    """~30 s of tokens: in flight for the whole drain (ended by the shutdown timeout)."""
    try:
        requests.post(url + "/v1/completions", timeout=120, json={
            "model": "tiny", "prompt": "hi", "max_tokens": 300, "ignore_eos": True,
            "vllm_xargs": {"sim_itl_ms": 100, "sim_output_mode": "random"}})
    except requests.RequestException:
        pass  # the deployment stopped under it at the test's end


def _accepted(port: int) -> socket.socket:
    """A keep-alive connection the worker has accepted (its first request answered)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(_request("/health", b"", close=False))
    assert _read_response(sock).startswith(b"HTTP/1.1 200 OK")
    return sock


def _draining(sock: socket.socket) -> bool:
    with sock:
        sock.sendall(_request("/ready", b""))
        return b"draining" in _read_response(sock)


@pytest.mark.deployment(workers=1)
def test_other_methods_and_a_dead_engine_get_the_full_stacks_answers(fresh_server):
    srv = fresh_server
    for method in (b"HEAD", b"POST"):
        answer = _answer(srv.port, _request("/health", b"", method=method))
        assert answer.startswith(b"HTTP/1.1 405"), answer
    for pid in srv.engine_pids():
        os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: requests.get(srv.url + "/health", timeout=10).status_code == 503)
    answer = _answer(srv.port, _request("/health", b""))
    assert answer.startswith(b"HTTP/1.1 503") and b'"error"' in answer, answer
    assert b"dead" in answer, answer
    assert requests.get(srv.url + "/ready", timeout=10).status_code == 503
    assert not {"/health", "/ready"} & _http_handlers(srv.url)
