"""Stall detection against a real vLLM 0.32 engine: its pings are answered, its long steps are
not taken for a stall, and a stopped engine core is (then taken back after SIGCONT)."""
from __future__ import annotations

import os
import signal
import time

import pytest
import requests

from tests.support.processes import cmdline
from tests.integration.harness import wait_for
from tests.interop.peers import descendants, requires_peers, serve_with_greenfront

pytestmark = requires_peers

STALL = 3.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    logs = tmp_path_factory.mktemp("vllm-stall")
    ours = serve_with_greenfront(str(logs / "greenfront.log"),
                                 env={"GREENFRONT_ENGINE_STALL_TIMEOUT": str(STALL)})
    try:
        yield ours.wait_healthy()
    finally:
        ours.kill()


def _complete(url: str, prompt, max_tokens: int = 4) -> requests.Response:
    return requests.post(url + "/v1/completions", timeout=120, json={
        "model": "tiny", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0})


def test_a_live_engine_is_never_taken_for_stalled(stack):
    # Idle for several timeouts: the engine answers the pings.
    deadline = time.monotonic() + 3 * STALL
    while time.monotonic() < deadline:
        assert requests.get(stack.url + "/health", timeout=10).status_code == 200
        time.sleep(0.5)
    # Long prompts (prefill steps of 2,000 tokens) beside a decoding request.
    prompts = [[1000 + (i * 7919 + j) % 90000 for j in range(2000)] for i in range(3)]
    assert all(_complete(stack.url, p, 1).status_code == 200 for p in prompts)
    r = _complete(stack.url, "Hello", 200)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 200
    assert "said nothing for" not in stack.log()  # the stall log line


def test_a_stopped_engine_core_is_stalled_then_taken_back(stack):
    (core,) = [pid for pid in descendants(stack.proc.pid) if "EngineCore" in cmdline(pid)]
    os.kill(core, signal.SIGSTOP)
    try:
        assert wait_for(lambda: requests.get(stack.url + "/health", timeout=10).status_code
                        == 503, STALL + 10)
        refused = _complete(stack.url, "Hello")
        assert refused.status_code == 503 and "stalled" in refused.json()["error"]["message"]
    finally:
        os.kill(core, signal.SIGCONT)
    assert wait_for(lambda: requests.get(stack.url + "/health", timeout=10).status_code == 200,
                    30)
    assert _complete(stack.url, "Hello").status_code == 200
