"""``--lora-modules`` (GREENFRONT_LORA_MODULES): adapters loaded into the engines at start-up.

As vLLM 0.32: each module is loaded once the engines are up, listed by ``/v1/models`` (parent:
its ``base_model_name``, else the served model), and served when a request names it; the
runtime load/unload routes stay off unless VLLM_ALLOW_RUNTIME_LORA_UPDATING=1. A module the
engines cannot load stops the server, as it fails vLLM's start.
"""
from __future__ import annotations

import json

import pytest
import requests

from tests.integration.harness import GreenfrontServer, wait_for
from tests.support.raw_http import open_stream
from tests.support.scrape import current_lora_info, lora_info

MODULES = [{"name": "sql", "path": "/adapters/sql"},
           {"name": "chatty", "path": "/adapters/chatty", "base_model_name": "base-x"}]


def _long_stream(model: str) -> dict:
    return {"model": model, "prompt": "hello", "max_tokens": 3000, "ignore_eos": True,
            "stream": True}


def _models(url: str) -> dict:
    return {m["id"]: m for m in requests.get(url + "/v1/models", timeout=10).json()["data"]}


@pytest.mark.deployment(workers=2, sim_args="--output-mode echo --enable-lora",
                        env={"GREENFRONT_LORA_MODULES": json.dumps(MODULES)})
def test_modules_are_loaded_listed_and_served(fresh_server):
    srv = fresh_server
    assert wait_for(lambda: {"sql", "chatty"} <= set(_models(srv.url)), timeout=60)
    models = _models(srv.url)
    assert (models["sql"]["root"], models["sql"]["parent"]) == ("/adapters/sql", "tiny")
    assert models["chatty"]["parent"] == "base-x"
    for _ in range(4):  # fresh connections: both workers serve the adapters
        out = requests.post(srv.url + "/v1/completions", timeout=60, json={
            "model": "sql", "prompt": "hello", "max_tokens": 2})
        assert out.status_code == 200 and out.json()["model"] == "sql", out.text
    assert requests.post(srv.url + "/v1/completions", timeout=60, json={
        "model": "nope", "prompt": "hello", "max_tokens": 2}).status_code == 404
    assert requests.post(srv.url + "/v1/unload_lora_adapter", timeout=10,
                         json={"lora_name": "sql"}).status_code == 404  # runtime updates off


def test_a_module_the_engines_cannot_load_stops_the_server(model_dir, tmp_path):
    srv = GreenfrontServer(model_dir, sim_args="--output-mode echo",  # no --enable-lora
                           env={"GREENFRONT_LORA_MODULES": json.dumps(MODULES[:1])})
    srv.log_path = str(tmp_path / "server.log")  # the server removes its run dir on exit
    srv.launch()
    try:
        assert srv.proc.wait(90) != 0
        log = srv.log()
        assert "--lora-modules sql=/adapters/sql did not load" in log and "--enable-lora" in log
    finally:
        srv.stop_later()


@pytest.mark.deployment(sim_args="--output-mode echo --enable-lora --max-loras 3",
                        env={"GREENFRONT_LORA_MODULES": json.dumps(MODULES)})
def test_lora_requests_info_lists_the_adapters_with_requests_in_flight(fresh_server):
    """vLLM 0.32's vllm:lora_requests_info: made only with LoRA support, one series per set of
    adapters in flight (both labels alike, in first-seen order), stamped at each stats update."""
    srv = fresh_server
    assert wait_for(lambda: {"sql", "chatty"} <= set(_models(srv.url)), timeout=60)
    assert requests.post(srv.url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "hello", "max_tokens": 2}).status_code == 200
    assert wait_for(lambda: current_lora_info(srv.url) == ("3", "", ""))
    first = open_stream(srv.url, _long_stream("sql"))
    assert wait_for(lambda: current_lora_info(srv.url) == ("3", "sql", "sql")), lora_info(srv.url)
    second = open_stream(srv.url, _long_stream("chatty"))
    assert wait_for(lambda: current_lora_info(srv.url) == ("3", "sql,chatty", "sql,chatty"))
    first.close()  # the disconnect aborts it: the adapter leaves at the next stats update
    assert wait_for(lambda: current_lora_info(srv.url) == ("3", "chatty", "chatty")), \
        lora_info(srv.url)
    second.close()
    # No request left: the engine goes idle; a plain request brings the next stats update.
    assert requests.post(srv.url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "hello", "max_tokens": 2}).status_code == 200
    assert wait_for(lambda: current_lora_info(srv.url) == ("3", "", ""))


@pytest.mark.deployment(sim_args="--output-mode echo")
def test_no_lora_requests_info_without_lora_support(fresh_server):
    srv = fresh_server
    assert requests.post(srv.url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "hello", "max_tokens": 2}).status_code == 200
    metrics = lambda: requests.get(srv.url + "/metrics", timeout=10).text  # noqa: E731
    assert wait_for(lambda: "vllm:num_requests_running{" in metrics())  # the stats are in
    assert "vllm:lora_requests_info" not in metrics()
