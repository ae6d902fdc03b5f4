"""/ready: the readiness probe in its states, on real gunicorn workers and simulator engines."""
from __future__ import annotations

import subprocess
import sys
import threading

import requests

from tests.support.processes import free_port_block
from tests.integration.harness import ROOT, wait_for


def _ready(srv) -> tuple[int, str]:
    r = requests.get(srv.url + "/ready", timeout=30)
    return r.status_code, (r.json()["error"]["message"] if r.status_code != 200 else "")


def test_ready_waits_for_the_engines_to_register(make_server):
    handshake = f"tcp://127.0.0.1:{free_port_block(3)}"  # + the worker's 2 ports
    srv = make_server(wait_healthy=False, env={"GREENFRONT_ENGINE": "external",
                                               "GREENFRONT_ACCEPT_WAIT": "0",
                                               "GREENFRONT_HANDSHAKE_ADDRESS": handshake})
    status, message = _ready(srv)
    assert status == 503
    assert message == "Not ready: the engines have not registered yet."
    engine = subprocess.Popen([sys.executable, "-m", "engine.sim", "--handshake", handshake],
                              cwd=ROOT)
    try:
        assert wait_for(lambda: _ready(srv)[0] == 200, timeout=60), srv.log()
        assert requests.get(srv.url + "/health", timeout=10).status_code == 200
    finally:
        engine.kill()
        engine.wait()


def test_ready_turns_503_while_the_hub_lags_and_needs_no_api_key(make_server):
    # Request work run inline in the hub (offload off) with the slow reference tokenizer holds
    # the hub for most of a second: its lag timer fires that late.
    srv = make_server(env={"GREENFRONT_OFFLOAD": "0", "GREENFRONT_TOKENIZER_BACKEND": "hf",
                           "GREENFRONT_READY_MAX_HUB_LAG": "0.1", "GREENFRONT_API_KEY": "k"})
    assert _ready(srv) == (200, "")  # no Authorization header: the probe is not guarded

    def hold_the_hub():
        requests.post(srv.url + "/tokenize", headers={"Authorization": "Bearer k"},
                      json={"prompt": "lorem ipsum dolor sit amet " * 25000}, timeout=120)
    worker = threading.Thread(target=hold_the_hub)
    worker.start()
    seen: list[str] = []

    def lagging() -> bool:
        status, message = _ready(srv)
        seen.append(message)
        return status == 503
    try:
        assert wait_for(lagging, timeout=60), seen
    finally:
        worker.join(120)
    assert "the HTTP hub is" in seen[-1] and "late (threshold 100 ms)" in seen[-1]
    lag = [line for line in requests.get(srv.url + "/metrics", timeout=10).text.splitlines()
           if line.startswith("greenfront:hub_lag_seconds")]
    assert lag, "hub lag gauge missing"
    assert wait_for(lambda: _ready(srv)[0] == 200, timeout=30)
