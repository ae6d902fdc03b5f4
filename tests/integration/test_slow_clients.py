"""Clients that stop reading: the worker's memory stays bounded and their responses are aborted.

Real gunicorn and simulator; the clients are raw sockets with a tiny receive buffer that send
a streamed completion of a hundred thousand tokens and then never read. The simulator produces
a token every 2 ms for each, so a worker that kept everything it could not write would
grow by megabytes per second.
"""
from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from tests.integration.harness import wait_for

TIMEOUT = 3.0
CLIENTS = 10
#: RSS growth allowed while the non-reading clients are connected (their queued tokens until
#: the timeout, the chunks being written, allocator slack).
BOUND_MB = 32


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _non_reader(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    body = json.dumps({"model": "tiny", "prompt": "a b c d", "max_tokens": 100000,
                       "stream": True, "ignore_eos": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                 b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


def _engines_running(url: str) -> float:
    text = requests.get(url + "/metrics", timeout=30).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:num_requests_running"))


def test_non_reading_clients_do_not_grow_the_worker_and_are_aborted(make_server):
    srv = make_server(sim_args="--output-mode echo --ttft-ms 1 --itl-ms 2 --max-model-len 200000",
                      env={"GREENFRONT_CLIENT_STALL_TIMEOUT": str(TIMEOUT)})
    (worker,) = srv.worker_pids()
    # Warm-up: the code paths and buffers a stream uses, then the baseline. The three streams
    # run at once (4 s each at 2 ms per token; one after another they were half this test).
    def warm(_: int) -> str:
        r = requests.post(srv.url + "/v1/completions", timeout=60, json={
            "model": "tiny", "prompt": "a b c d", "max_tokens": 2000, "stream": True,
            "ignore_eos": True})
        assert r.status_code == 200
        return r.text
    with ThreadPoolExecutor(3) as pool:
        assert all(text.endswith("data: [DONE]\n\n") for text in pool.map(warm, range(3)))
    baseline = _rss_mb(worker)
    clients = [_non_reader(srv.port) for _ in range(CLIENTS)]
    try:
        assert wait_for(lambda: requests.get(srv.url + "/load", timeout=30).json()
                        ["server_load"] == CLIENTS, 30)
        peak = baseline
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            peak = max(peak, _rss_mb(worker))
            if requests.get(srv.url + "/load", timeout=30).json()["server_load"] == 0:
                break
            time.sleep(0.2)
        # Every response was aborted, and its engine request with it.
        assert requests.get(srv.url + "/load", timeout=30).json() == {"server_load": 0}
        assert wait_for(lambda: _engines_running(srv.url) == 0, 30)
        peak = max(peak, _rss_mb(worker))
        assert peak - baseline < BOUND_MB, f"worker RSS grew {peak - baseline:.1f} MB"
        print(f"worker RSS {baseline:.1f} MB -> peak {peak:.1f} MB with {CLIENTS} non-reading "
              f"clients")
        # The server closed their connections.
        for sock in clients:
            sock.settimeout(10)
            try:
                while sock.recv(1 << 16):
                    pass
            except ConnectionResetError:
                pass
    finally:
        for sock in clients:
            sock.close()
    assert "read nothing for 3 s" in srv.log()
    # A reading client is served as before.
    r = requests.post(srv.url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "a b c d", "max_tokens": 50, "stream": True})
    assert r.status_code == 200 and r.text.endswith("data: [DONE]\n\n")
