"""Queue limits (``--max-num-queued-reqs``, ``--max-num-queued-tokens``) on real deployments.

Requests over a limit get vLLM's 503 (before any engine sees them, streams included) with
``Retry-After``, counted in ``vllm:admission_rejections{reason}``; the request limit covers the
whole deployment (2 workers share their counts); once the backlog shrinks, requests pass again.
"""
from __future__ import annotations

import threading

import pytest
import requests

from tests.integration.harness import wait_for
from tests.integration.promql import samples

#: A token every 100 ms: a 400-token stream runs for ~40 s unless its client leaves.
SLOW = {"sim_itl_ms": 100}
BUSY = ("The engine is currently busy and cannot accept new requests. Please try again later "
        "or on a different instance.")


class _SlowStream:
    """A streamed completion held open until ``close``; ``started`` once its first event came."""

    def __init__(self, url: str, **extra) -> None:
        self.started = threading.Event()
        self._stop = threading.Event()
        body = {"model": "tiny", "prompt": "hello there", "max_tokens": 400, "stream": True,
                "ignore_eos": True, "vllm_xargs": SLOW, **extra}
        self._thread = threading.Thread(target=self._run, args=(url, body), daemon=True)
        self._thread.start()

    def _run(self, url: str, body: dict) -> None:
        with requests.post(url + "/v1/completions", json=body, stream=True, timeout=120) as r:
            for line in r.iter_lines():
                if line.startswith(b"data: "):
                    self.started.set()
                if self._stop.is_set():
                    return  # closing the connection aborts the request

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _post(url: str, **body) -> requests.Response:
    return requests.post(url + "/v1/completions", timeout=60,
                         json={"model": "tiny", "prompt": "hi", "max_tokens": 1, **body})


def _rejections(url: str, reason: str) -> float:
    text = requests.get(url + "/metrics", timeout=30).text
    return sum(v for labels, v in samples(text).get("vllm:admission_rejections_total", {}).items()
               if ("reason", reason) in labels)


def _assert_busy(resp: requests.Response) -> None:
    assert resp.status_code == 503, resp.text
    assert resp.headers["Retry-After"] == "1"
    assert resp.json() == {"error": {"message": BUSY, "type": "Service Unavailable",
                                     "param": None, "code": 503}}


@pytest.mark.deployment(workers=2, env={"GREENFRONT_MAX_NUM_QUEUED_REQS": "3"})
def test_request_limit_over_two_workers(fresh_server):
    srv = fresh_server
    held = [_SlowStream(srv.url) for _ in range(3)]
    try:
        assert all(s.started.wait(60) for s in held)
        for _ in range(4):  # fresh connections: both workers answer some of them
            _assert_busy(_post(srv.url))
        _assert_busy(_post(srv.url, stream=True))  # a 503, not a 200 stream
        held.pop().close()
        # One slot is free again: a request passes, and one with n=2 does not.
        assert wait_for(lambda: _post(srv.url).status_code == 200, timeout=30)
        _assert_busy(_post(srv.url, n=2, temperature=1.0))
        assert wait_for(lambda: _rejections(srv.url, "max_num_queued_reqs") == 6, timeout=30)
        assert _rejections(srv.url, "max_num_queued_tokens") == 0
    finally:
        for s in held:
            s.close()


@pytest.mark.deployment(workers=1, env={"GREENFRONT_MAX_NUM_QUEUED_TOKENS": "8"})
def test_prefill_token_limit(fresh_server):
    srv = fresh_server
    # 12 prompt tokens that wait 2 s for their first output: the backlog is over the limit.
    waiting = _SlowStream(srv.url, prompt=list(range(100, 112)),
                          vllm_xargs={**SLOW, "sim_ttft_ms": 2000})
    try:
        refused = []
        assert wait_for(lambda: refused.append(_post(srv.url)) or
                        refused[-1].status_code == 503, timeout=10), refused[-1].text
        assert refused[-1].headers["Retry-After"] == "1"
        assert "prefill token backlog limit" in refused[-1].json()["error"]["message"]
        assert waiting.started.wait(30)  # its first token: its prompt is no longer queued
        assert _post(srv.url).status_code == 200
        assert wait_for(lambda: _rejections(srv.url, "max_num_queued_tokens") >= 1, timeout=30)
    finally:
        waiting.close()
