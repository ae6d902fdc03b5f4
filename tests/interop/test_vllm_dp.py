"""``vllm serve --data-parallel-size 2`` with greenfront as the frontend: two real engine
processes, both used, greedy output unchanged."""
from __future__ import annotations

import re
import threading

import pytest
import requests

from tests.interop.peers import WORKER_COUNTS, requires_peers, serve_with_greenfront

pytestmark = requires_peers


@pytest.fixture(scope="module", params=WORKER_COUNTS, ids=lambda n: f"{n}-workers")
def dp2(request, tmp_path_factory):
    logs = tmp_path_factory.mktemp("vllm-dp2")
    stack = serve_with_greenfront(str(logs / "greenfront-dp2.log"),
                                  ["--data-parallel-size", "2"], workers=request.param)
    try:
        yield stack.wait_healthy(timeout=420)
    finally:
        stack.kill()


def test_two_engines_serve_and_both_get_work(dp2):
    body = {"model": "tiny", "prompt": "The capital of France is", "max_tokens": 8,
            "temperature": 0}
    texts = []

    def call():
        r = requests.post(dp2.url + "/v1/completions", json=body, timeout=300)
        assert r.status_code == 200, r.text
        texts.append(r.json()["choices"][0]["text"])

    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert texts == [":** нельзя bernKey Execut\ufffdKey Execut"] * 6
    metrics = requests.get(dp2.url + "/metrics", timeout=10).text
    engines = set(re.findall(r'vllm:num_requests_running\{engine="(\d)"', metrics))
    assert engines == {"0", "1"}, metrics
    assert "frontend --listen-fd" in open(dp2.log_path).read()
    assert "--engine-count 2" in open(dp2.log_path).read()
