"""Stalled engines: a simulator stopped with SIGSTOP under load, then continued with SIGCONT.

Real gunicorn, simulator processes and HTTP clients. The stall timeout is shortened to a few
seconds through its setting; everything else is the default deployment.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
import requests

from tests.integration.harness import wait_for

STALL = 3.0
#: What "within the stall timeout plus a few seconds" allows on a shared 2-core machine.
SLACK = 10.0
#: The DP test's liveness timeout: /health fails once a rank is silent this long.
LIVENESS = 8.0
SIM = "--output-mode echo --ttft-ms 5 --itl-ms 40 --max-model-len 100000"


class _Stream:
    """One streamed completion read on its own thread: chunks, the error event, the end."""

    def __init__(self, url: str, max_tokens: int, headers: dict | None = None) -> None:
        self.chunks = 0
        self.error: dict | None = None
        self.done = False
        self.finish_reason: str | None = None
        self.status: int | None = None
        self.ended_at: float | None = None
        body = {"model": "tiny", "prompt": "a b c", "max_tokens": max_tokens, "stream": True,
                "ignore_eos": True}
        self._thread = threading.Thread(target=self._run, args=(url, body, headers or {}),
                                        daemon=True)
        self._thread.start()

    def _run(self, url: str, body: dict, headers: dict) -> None:
        try:
            with requests.post(url + "/v1/completions", json=body, headers=headers,
                               stream=True, timeout=120) as resp:
                self.status = resp.status_code
                for line in resp.iter_lines():
                    if line == b"data: [DONE]":
                        self.done = True
                    elif line.startswith(b"data: "):
                        event = json.loads(line[6:])
                        if "error" in event:
                            self.error = event["error"]
                        else:
                            self.chunks += 1
                            for choice in event.get("choices", []):
                                self.finish_reason = choice.get("finish_reason") or \
                                    self.finish_reason
        finally:
            self.ended_at = time.monotonic()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


def _engines_running(url: str) -> float:
    text = requests.get(url + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:num_requests_running"))


def _complete(url: str, headers: dict | None = None) -> requests.Response:
    return requests.post(url + "/v1/completions", headers=headers or {}, timeout=60,
                         json={"model": "tiny", "prompt": "x", "max_tokens": 3})


def _sim_pid(srv, rank: int) -> int:
    for pid in srv.engine_pids():
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        if args[args.index(b"--rank") + 1] == str(rank).encode():
            return pid
    raise AssertionError(f"no simulator of rank {rank}")


@pytest.mark.deployment(sim_args=SIM, env={"GREENFRONT_ENGINE_STALL_TIMEOUT": str(STALL),
                                           "GREENFRONT_REQUEST_WORKER_THREADS": "4"})
def test_sigstop_under_100_streams_ends_them_and_sigcont_takes_the_engine_back(fresh_server):
    srv = fresh_server
    streams = [_Stream(srv.url, 5000) for _ in range(100)]
    assert wait_for(lambda: all(s.chunks > 0 for s in streams), 60), \
        [s.status for s in streams if not s.chunks]
    sim = _sim_pid(srv, 0)
    os.kill(sim, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        assert all(s.join(STALL + SLACK) for s in streams), "streams still open after the stall"
        assert all(s.status == 200 and s.error is not None for s in streams)
        assert {s.error["code"] for s in streams} == {503}
        assert all("stalled" in s.error["message"] for s in streams)
        assert max(s.ended_at for s in streams) - stopped <= STALL + SLACK
        # New requests: 503 in OpenAI's envelope, streamed or not; readiness fails.
        refused = _complete(srv.url)
        assert refused.status_code == 503
        assert refused.json()["error"]["type"] == "ServiceUnavailableError"
        late = _Stream(srv.url, 5)
        assert late.join(30) and late.status == 503
        health = requests.get(srv.url + "/health", timeout=10)
        assert health.status_code == 503 and "stalled" in health.json()["error"]["message"]
    finally:
        os.kill(sim, signal.SIGCONT)
    assert wait_for(lambda: requests.get(srv.url + "/health", timeout=10).status_code == 200,
                    30)
    served = _complete(srv.url)
    assert served.status_code == 200 and served.json()["usage"]["completion_tokens"] == 3
    # The aborts queued while it was stopped reached the engine: nothing left running there.
    assert requests.get(srv.url + "/load", timeout=10).json() == {"server_load": 0}
    assert wait_for(lambda: _engines_running(srv.url) == 0, 30)
    assert "engine 0 answers again" in srv.log()


@pytest.mark.deployment(sim_args=SIM, env={"GREENFRONT_ENGINE_STALL_TIMEOUT": str(STALL)})
def test_an_idle_engine_that_stops_answering_pings_is_stalled(fresh_server):
    srv = fresh_server
    sim = _sim_pid(srv, 0)
    os.kill(sim, signal.SIGSTOP)
    try:
        assert wait_for(lambda: requests.get(srv.url + "/health", timeout=10).status_code == 503,
                        STALL + SLACK)
        assert _complete(srv.url).status_code == 503
    finally:
        os.kill(sim, signal.SIGCONT)
    assert wait_for(lambda: requests.get(srv.url + "/health", timeout=10).status_code == 200,
                    30)
    assert _complete(srv.url).status_code == 200


@pytest.mark.deployment(sim_args=SIM, env={
    "GREENFRONT_ENGINE_COUNT": "2", "GREENFRONT_ENGINE_STALL_TIMEOUT": str(STALL),
    "GREENFRONT_ENGINE_STALL_LIVENESS_TIMEOUT": str(LIVENESS)})
def test_dp_only_the_stalled_rank_is_avoided_and_liveness_fails_later(fresh_server):
    liveness = LIVENESS
    srv = fresh_server
    # 160 tokens at 40 ms: rank 0's streams end ~6 s in, before the liveness timeout.
    streams = [_Stream(srv.url, 160) for _ in range(20)]
    assert wait_for(lambda: all(s.chunks > 0 for s in streams), 60)
    sim = _sim_pid(srv, 1)
    os.kill(sim, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        assert all(s.join(60) for s in streams)
        failed = [s for s in streams if s.error is not None]
        finished = [s for s in streams if s.error is None]
        # Least-loaded routing put about half on each rank: rank 1's end with 503 events,
        # rank 0's run to the end.
        assert failed and finished
        assert {s.error["code"] for s in failed} == {503}
        assert all(s.done and s.finish_reason == "length" for s in finished)
        # New requests go to rank 0; pinned to rank 1 they get 503; readiness holds.
        assert all(_complete(srv.url).status_code == 200 for _ in range(4))
        pinned = _complete(srv.url, {"X-data-parallel-rank": "1"})
        assert pinned.status_code == 503 and "engine 1" in pinned.json()["error"]["message"]
        assert _complete(srv.url, {"X-data-parallel-rank": "0"}).status_code == 200
        assert requests.get(srv.url + "/health", timeout=10).status_code == 200 \
            or time.monotonic() - stopped >= liveness
        # Silent longer than the liveness timeout: /health fails so the deployment restarts.
        assert wait_for(lambda: requests.get(srv.url + "/health", timeout=10).status_code
                        == 503, liveness + SLACK)
    finally:
        os.kill(sim, signal.SIGCONT)
    assert wait_for(lambda: requests.get(srv.url + "/health", timeout=10).status_code == 200,
                    30)
    assert _complete(srv.url, {"X-data-parallel-rank": "1"}).status_code == 200
    assert wait_for(lambda: _engines_running(srv.url) == 0, 30)
