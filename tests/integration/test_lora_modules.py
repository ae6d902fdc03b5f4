"""``--lora-modules`` (GREENFRONT_LORA_MODULES): adapters loaded into the engines at start-up.

As vLLM 0.32: each module is loaded once the engines are up, listed by ``/v1/models`` (parent:
its ``base_model_name``, else the served model), and served when a request names it; the
runtime load/unload routes stay off unless VLLM_ALLOW_RUNTIME_LORA_UPDATING=1. A module the
engines cannot load stops the server, as it fails vLLM's start.
"""
from __future__ import annotations

import json
import re
import socket

import requests

from tests.integration.harness import GreenfrontServer, wait_for

MODULES = [{"name": "sql", "path": "/adapters/sql"},
           {"name": "chatty", "path": "/adapters/chatty", "base_model_name": "base-x"}]


def _models(url: str) -> dict:
    return {m["id"]: m for m in requests.get(url + "/v1/models", timeout=10).json()["data"]}


def test_modules_are_loaded_listed_and_served(make_server):
    srv = make_server(workers=2, sim_args="--output-mode echo --enable-lora",
                      env={"GREENFRONT_LORA_MODULES": json.dumps(MODULES)})
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
        srv.stop()


_LORA_INFO = re.compile(r'^vllm:lora_requests_info\{(.*)\} (\S+)$', re.M)


def _lora_info(url: str) -> dict[tuple[str, str, str], float]:
    """Each vllm:lora_requests_info series: (max_lora, waiting, running) -> its time."""
    found = {}
    for labels, value in _LORA_INFO.findall(requests.get(url + "/metrics", timeout=10).text):
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        found[(pairs["max_lora"], pairs["waiting_lora_adapters"],
               pairs["running_lora_adapters"])] = float(value)
    return found


def _current(url: str) -> tuple[str, str, str] | None:
    """The latest-stamped series: the adapters with requests in flight now."""
    series = _lora_info(url)
    return max(series, key=series.get) if series else None


def _stream(url: str, model: str) -> socket.socket:
    """A long streamed completion naming ``model``, left unread after its first chunk."""
    payload = json.dumps({"model": model, "prompt": "hello", "max_tokens": 3000,
                          "ignore_eos": True, "stream": True}).encode()
    host, port = url.rsplit("//", 1)[1].split(":")
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
    received = b""
    while b"data: " not in received:
        received += sock.recv(65536)
    return sock


def test_lora_requests_info_lists_the_adapters_with_requests_in_flight(make_server):
    """vLLM 0.32's vllm:lora_requests_info: made only with LoRA support, one series per set of
    adapters in flight (both labels alike, in first-seen order), stamped at each stats update."""
    srv = make_server(sim_args="--output-mode echo --enable-lora --max-loras 3",
                      env={"GREENFRONT_LORA_MODULES": json.dumps(MODULES)})
    assert wait_for(lambda: {"sql", "chatty"} <= set(_models(srv.url)), timeout=60)
    assert requests.post(srv.url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "hello", "max_tokens": 2}).status_code == 200
    assert wait_for(lambda: _current(srv.url) == ("3", "", ""))
    first = _stream(srv.url, "sql")
    assert wait_for(lambda: _current(srv.url) == ("3", "sql", "sql")), _lora_info(srv.url)
    second = _stream(srv.url, "chatty")
    assert wait_for(lambda: _current(srv.url) == ("3", "sql,chatty", "sql,chatty"))
    first.close()  # the disconnect aborts it: the adapter leaves at the next stats update
    assert wait_for(lambda: _current(srv.url) == ("3", "chatty", "chatty")), _lora_info(srv.url)
    second.close()
    # No request left: the engine goes idle; a plain request brings the next stats update.
    assert requests.post(srv.url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "hello", "max_tokens": 2}).status_code == 200
    assert wait_for(lambda: _current(srv.url) == ("3", "", ""))


def test_no_lora_requests_info_without_lora_support(make_server):
    srv = make_server(sim_args="--output-mode echo")
    assert requests.post(srv.url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "hello", "max_tokens": 2}).status_code == 200
    metrics = lambda: requests.get(srv.url + "/metrics", timeout=10).text  # noqa: E731
    assert wait_for(lambda: "vllm:num_requests_running{" in metrics())  # the stats are in
    assert "vllm:lora_requests_info" not in metrics()
