"""Task discovery on a real deployment: routes follow what the engine says it does.

A pooling engine (the simulator with ``--runner pooling``, which dies on a generation request
exactly as vLLM 0.32's engine core does) never sees a generation request: the generation routes
answer vLLM's bare 404 and the engine keeps serving. A generate engine answers the same 404 on
the pooling routes.
"""
from __future__ import annotations

import os
import time

import pytest
import requests

GENERATION = [("/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 2}),
              ("/v1/chat/completions", {"model": "tiny", "max_tokens": 2,
                                        "messages": [{"role": "user", "content": "hi"}]}),
              ("/inference/v1/generate", {"token_ids": [1, 2], "sampling_params": {}}),
              ("/v1/responses", {"model": "tiny", "input": "hi", "max_output_tokens": 2}),
              ("/v1/messages", {"model": "tiny", "max_tokens": 2,
                                "messages": [{"role": "user", "content": "hi"}]})]
POOLING = ["/v1/embeddings", "/pooling", "/classify", "/score", "/v1/score", "/rerank",
           "/v1/rerank", "/v2/rerank", "/v2/embed"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_generation_routes_answer_404_and_the_pooling_engine_keeps_serving(embed_server):
    (engine,) = embed_server.engine_pids()
    for path, body in GENERATION * 2:
        r = requests.post(embed_server.url + path, json=body, timeout=30)
        assert r.status_code == 404, (path, r.text)
        assert r.content == b'{"detail":"Not Found"}'
        assert r.headers["Content-Type"] == "application/json"
    time.sleep(0.5)  # a request that reached the engine would have killed it by now
    assert _alive(engine)
    assert "fatal to a pooling engine" not in embed_server.log()
    assert requests.get(embed_server.url + "/health", timeout=10).status_code == 200
    r = requests.post(embed_server.url + "/tokenize", json={"prompt": "hi"}, timeout=30)
    assert r.status_code == 200, r.text


def test_pooling_routes_answer_404_on_a_generate_engine(server):
    for path in POOLING:
        r = requests.post(server.url + path, json={"model": "tiny", "input": "hi"}, timeout=30)
        assert r.status_code == 404, (path, r.text)
        assert r.json() == {"detail": "Not Found"}
    r = requests.post(server.url + "/v1/completions",
                      json={"model": "tiny", "prompt": "hi", "max_tokens": 2}, timeout=30)
    assert r.status_code == 200, r.text
