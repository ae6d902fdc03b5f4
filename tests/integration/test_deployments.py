"""Deployment shapes: offload off (the benchmark baseline) and several engines."""
from __future__ import annotations

import re
import subprocess
import sys
import threading

import openai
import pytest
import requests

from tests.support.processes import free_port_block
from tests.integration.harness import ROOT, GreenfrontServer, wait_for


@pytest.mark.deployment(env={"GREENFRONT_OFFLOAD": "0"},
                        sim_args="--output-mode echo --itl-ms 2")
def test_offload_off_serves_the_same_api(fresh_server):
    srv = fresh_server
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
    out = client.completions.create(model="tiny", prompt="Hello world", max_tokens=2,
                                    temperature=0)
    assert out.choices[0].text == "Hello world"
    chunks = list(client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=4,
        temperature=0, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Say hi"
    r = requests.post(srv.url + "/tokenize", json={"prompt": "Hello world"}, timeout=10)
    assert r.json()["tokens"] == [1, 22177, 4304]


@pytest.mark.deployment(env={"GREENFRONT_ENGINE_COUNT": "2"},
                        sim_args="--output-mode echo --itl-ms 20 --verbose")
def test_two_engines_share_the_load_and_honour_a_pinned_rank(fresh_server):
    srv = fresh_server
    body = {"prompt": "one two three four five six", "max_tokens": 10, "temperature": 0}

    def call():
        r = requests.post(srv.url + "/v1/completions", json=body, timeout=60)
        assert r.status_code == 200, r.text

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    adds = re.findall(r"engine\.sim rank=(\d) ADD ", srv.log())
    assert {"0", "1"} <= set(adds), adds
    r = requests.post(srv.url + "/v1/completions", json=body, timeout=60,
                      headers={"X-data-parallel-rank": "1", "X-Request-Id": "pinned-1"})
    assert r.status_code == 200 and r.json()["id"] == "cmpl-pinned-1"
    assert re.search(r"engine\.sim rank=1 ADD cmpl-pinned-1", srv.log()), srv.log()
    bad = requests.post(srv.url + "/v1/completions", json=body, timeout=60,
                        headers={"X-data-parallel-rank": "7"})
    assert bad.status_code == 400


@pytest.mark.deployment(sim_args="--max-model-len 131072 --output-mode echo --itl-ms 5")
def test_concurrent_huge_prompts_all_complete(fresh_server):
    # Regression: large ADD frames sent concurrently from the pool once came out corrupted
    # (pyzmq zero-copy sends under gevent), and the engine ignored them: requests hung.
    srv = fresh_server
    words = "alpha beta Zürich café 1234 gamma, delta; epsilon".split()
    results = []

    def call(seed):
        prompt = " ".join(words[(seed + i * 7) % len(words)] for i in range(40000))
        r = requests.post(srv.url + "/v1/completions",
                          json={"prompt": prompt, "max_tokens": 2}, timeout=60)
        results.append((r.status_code, r.json()["usage"]["prompt_tokens"]))

    threads = [threading.Thread(target=call, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and all(code == 200 and n > 40000 for code, n in results), results
    assert "ignoring request" not in srv.log()


def test_an_engine_that_only_has_tcp_serves_every_worker(model_dir, tmp_path):
    # An engine on another host reaches the workers through TCP only: with a TCP handshake
    # address the workers listen on the ports after it, and the engine is told those.
    handshake = f"tcp://127.0.0.1:{free_port_block(5)}"  # + 2 ports per worker
    srv = GreenfrontServer(model_dir, workers=2, env={
        "GREENFRONT_ENGINE": "external", "GREENFRONT_HANDSHAKE_ADDRESS": handshake}).launch()
    log = open(tmp_path / "engine.log", "wb")
    engine = subprocess.Popen([sys.executable, "-m", "engine.sim", "--handshake", handshake,
                               "--output-mode", "echo"], cwd=ROOT, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: _status(srv.url + "/health") == 200, timeout=60), srv.log()
        for _ in range(8):
            r = requests.post(srv.url + "/v1/completions", timeout=30,
                              json={"prompt": "Hello world", "max_tokens": 2})
            assert r.status_code == 200 and r.json()["choices"][0]["text"] == "Hello world"
        ready = (tmp_path / "engine.log").read_text()
        assert "inputs=['tcp://127.0.0.1:" in ready and "ipc://" not in ready, ready
        # Both workers registered the engine through their own TCP sockets.
        registered = re.findall(r"\[(\d+)\] \[greenfront.engine\] engine 0 registered", srv.log())
        assert len(set(registered)) == 2, srv.log()
    finally:
        srv.stop_later()
        engine.kill()
        engine.wait()
        log.close()


def _status(url: str) -> int:
    try:
        return requests.get(url, timeout=2).status_code
    except requests.RequestException:
        return 0
