"""vllm:lora_requests_info beside vLLM 0.32's own Python frontend, both on greenfront's simulator
with LoRA support: the same requests in flight give the same current series."""
from __future__ import annotations

import json

import requests

from tests.integration.harness import GreenfrontServer, wait_for
from tests.interop.peers import requires_peers, vllm_frontend_on_simulator
from tests.support.raw_http import open_stream
from tests.support.scrape import current_lora_info, lora_info

pytestmark = requires_peers

SIM_LORA = ["--output-mode", "echo", "--enable-lora", "--max-loras", "3"]
MODULES = {"sql": "/adapters/sql", "chatty": "/adapters/chatty"}


def _long_stream(model: str) -> dict:
    return {"model": model, "prompt": "hello", "max_tokens": 1500, "ignore_eos": True,
            "stream": True}


def _walk(url: str) -> list:
    """Requests through the adapters; the current series after each step."""
    seen = []

    def settle(expected: tuple) -> None:
        wait_for(lambda: current_lora_info(url) == expected, timeout=30)
        seen.append((current_lora_info(url), sorted(lora_info(url))))
    assert requests.post(url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "hello", "max_tokens": 2}).status_code == 200
    settle(("3", "", ""))
    first = open_stream(url, _long_stream("sql"))
    settle(("3", "sql", "sql"))
    second = open_stream(url, _long_stream("chatty"))
    settle(("3", "sql,chatty", "sql,chatty"))
    first.close()
    settle(("3", "chatty", "chatty"))
    second.close()
    return seen


def test_lora_requests_info_matches_vllms_python_frontend(tmp_path, model_dir):
    modules = [f"{name}={path}" for name, path in MODULES.items()]
    with vllm_frontend_on_simulator(str(tmp_path), ["--enable-lora", "--max-loras", "3",
                                                    "--lora-modules", *modules],
                                    timeout=900, sim_args=SIM_LORA) as frontend:
        theirs = _walk(frontend.url)
    srv = GreenfrontServer(model_dir, sim_args=" ".join(SIM_LORA), env={
        "GREENFRONT_MAX_MODEL_LEN": "2048",
        "GREENFRONT_LORA_MODULES": json.dumps([{"name": n, "path": p}
                                               for n, p in MODULES.items()])}).start(timeout=180)
    try:
        assert wait_for(lambda: "chatty" in requests.get(srv.url + "/v1/models",
                                                         timeout=10).text, timeout=60)
        ours = _walk(srv.url)
    finally:
        srv.stop()
    assert ours == theirs
