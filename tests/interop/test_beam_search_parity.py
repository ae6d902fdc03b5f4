"""Beam search beside vLLM 0.32's own Python frontend, on the same real engine (``vllm serve``
with the tiny model, once with vLLM's frontend and once with greenfront as its frontend):
completions (one prompt and a batch) and chat answers with ``n`` 2 to 4, ``length_penalty``,
``max_tokens``, ``include_stop_str_in_output``, ``ignore_eos``, logprobs, echo, and vLLM's
refusals, compared field by field (ids, timestamps and the fingerprint aside); streamed chat
answers compared byte for byte (ids, timestamps and the fingerprint aside); and the per-request metrics the step
requests of one search add to /metrics (the counters that do not depend on timing or on the
prefix cache's state)."""
from __future__ import annotations

import json
import re
import time

import pytest
import requests

from tests.interop.peers import requires_peers, serve_with_greenfront, serve_with_python_frontend

pytestmark = requires_peers
VARYING = ("id", "created", "system_fingerprint")


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    logs = tmp_path_factory.mktemp("beam-parity")
    # Stats on: the metrics test reads both /metrics.
    theirs = serve_with_python_frontend(str(logs / "python.log"))
    try:
        theirs.wait_healthy()
        ours = serve_with_greenfront(str(logs / "greenfront.log"))
        try:
            yield ours.wait_healthy(), theirs
        finally:
            ours.kill()
    finally:
        theirs.kill()


def _both(stacks, path: str, body: dict) -> tuple[requests.Response, requests.Response]:
    ours, theirs = stacks
    body = {"model": "tiny", "use_beam_search": True, **body}
    return (requests.post(ours.url + path, json=body, timeout=300),
            requests.post(theirs.url + path, json=body, timeout=300))


def _comparable(resp: requests.Response) -> dict:
    data = resp.json()
    for name in VARYING:
        data.pop(name, None)
    return data


PROMPT = "The capital of France is"
COMPLETIONS = [
    {"prompt": PROMPT, "n": 2, "max_tokens": 6, "temperature": 0},
    {"prompt": PROMPT, "n": 3, "max_tokens": 8, "logprobs": 3, "return_token_ids": True},
    {"prompt": PROMPT, "n": 4, "max_tokens": 5, "length_penalty": 0.3},
    {"prompt": PROMPT, "n": 2, "max_tokens": 5, "length_penalty": 2.0,
     "include_stop_str_in_output": True, "return_token_ids": True},
    {"prompt": PROMPT, "n": 2, "max_tokens": 4, "ignore_eos": True, "echo": True},
    {"prompt": ["Hello", "Once upon a time", "1, 2, 3,"], "n": 2, "max_tokens": 4,
     "return_token_ids": True},
    {"prompt": [[1, 22177, 2156], [1, 1784]], "n": 3, "max_tokens": 3},
    {"prompt": PROMPT, "n": 2, "max_tokens": 12, "skip_special_tokens": False, "logprobs": 0},
    {"prompt": PROMPT, "n": 2, "max_tokens": 3, "stop": ["a"], "top_p": 0.1, "seed": 3},
]
CHAT = [
    {"n": 2, "max_tokens": 6},
    {"n": 3, "max_tokens": 5, "logprobs": True, "top_logprobs": 2, "return_token_ids": True},
    {"n": 4, "max_tokens": 4, "length_penalty": 0.5, "temperature": 0.7},
    {"n": 2, "max_completion_tokens": 5, "include_stop_str_in_output": True},
]
REFUSED = [
    ("/v1/completions", {"prompt": PROMPT, "stream": True}),
    ("/v1/completions", {"prompt": PROMPT, "echo": True, "logprobs": 1}),
    ("/v1/completions", {"prompt": PROMPT, "logprobs": 1, "logprob_token_ids": [5]}),
    ("/v1/completions", {"prompt": PROMPT, "n": 11}),
    ("/v1/completions", {"prompt": PROMPT, "n": 0}),
    ("/v1/completions", {"prompt": PROMPT, "temperature": -1}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                              "logprobs": True, "logprob_token_ids": [5]}),
]


@pytest.mark.parametrize("body", COMPLETIONS, ids=lambda b: json.dumps(b)[:60])
def test_completions_as_vllm(stacks, body):
    ours, theirs = _both(stacks, "/v1/completions", body)
    assert (ours.status_code, theirs.status_code) == (200, 200), (ours.text, theirs.text)
    assert _comparable(ours) == _comparable(theirs)


@pytest.mark.parametrize("body", CHAT, ids=lambda b: json.dumps(b)[:60])
def test_chat_as_vllm(stacks, body):
    messages = [{"role": "user", "content": "Name three colours."}]
    ours, theirs = _both(stacks, "/v1/chat/completions", {"messages": messages, **body})
    assert (ours.status_code, theirs.status_code) == (200, 200), (ours.text, theirs.text)
    assert _comparable(ours) == _comparable(theirs)


@pytest.mark.parametrize("path, body", REFUSED, ids=lambda v: json.dumps(v)[:60])
def test_refusals_as_vllm(stacks, path, body):
    ours, theirs = _both(stacks, path, body)
    assert (ours.status_code, ours.json()) == (theirs.status_code, theirs.json())


STREAMED_CHAT = [
    {"n": 1, "max_tokens": 5},
    {"n": 2, "max_tokens": 4, "stream_options": {"include_usage": True}},
    {"n": 3, "max_tokens": 4, "stream_options": {"include_usage": True}},
    {"n": 3, "max_tokens": 3},
    {"n": 2, "max_tokens": 3, "logprobs": True, "top_logprobs": 2, "return_token_ids": True,
     "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"n": 1, "max_tokens": 4, "logprobs": True, "stream_options": {"include_usage": True}},
    {"n": 2, "max_completion_tokens": 6, "include_stop_str_in_output": True,
     "length_penalty": 0.5, "return_prompt_text": True},
]
_VARYING_BYTES = re.compile(
    rb'"id":"chatcmpl-[^"]*"|"created":[0-9]+|"system_fingerprint":"[^"]*"')


@pytest.mark.parametrize("body", STREAMED_CHAT, ids=lambda b: json.dumps(b)[:70])
def test_streamed_chat_as_vllm(stacks, body):
    messages = [{"role": "user", "content": "Name three colours."}]
    ours, theirs = _both(stacks, "/v1/chat/completions",
                         {"messages": messages, "stream": True, **body})
    assert (ours.status_code, theirs.status_code) == (200, 200), (ours.text, theirs.text)
    assert ours.headers["content-type"] == theirs.headers["content-type"]
    mine, vllms = (_VARYING_BYTES.sub(b"", r.content).split(b"\n\n") for r in (ours, theirs))
    assert len(mine) == len(vllms)
    for a, b in zip(mine, vllms):     # chunk by chunk: the first difference is the one shown
        assert a == b


#: Deterministic per-request figures: counts and token sums, not times, not cache hits.
_METRIC = re.compile(
    r"^(vllm:request_success_total|vllm:prompt_tokens_total|vllm:generation_tokens_total"
    r"|vllm:request_(prompt|generation)_tokens_(sum|count|bucket)"
    r"|vllm:request_params_(n|max_tokens)_(sum|count|bucket)"
    r"|vllm:request_max_num_generation_tokens_(sum|count|bucket)"
    r"|vllm:(e2e_request_latency|request_queue_time|time_to_first_token"
    r"|request_time_per_output_token|request_inference_time)_seconds_count)\{")


def _metrics(url: str) -> dict[str, float]:
    out = {}
    for line in requests.get(url + "/metrics", timeout=30).text.splitlines():
        if _METRIC.match(line):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


@pytest.mark.parametrize("path, body", [
    ("/v1/completions", {"prompt": ["Hello", "Once upon a time"], "n": 2, "max_tokens": 4}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "n": 3,
                              "max_tokens": 3, "stream": True}),
], ids=["completions", "streamed-chat"])
def test_step_requests_counted_in_metrics_as_vllm(stacks, path, body):
    ours, theirs = stacks
    before = [_metrics(ours.url), _metrics(theirs.url)]
    a, b = _both(stacks, path, body)
    assert (a.status_code, b.status_code) == (200, 200)

    def deltas() -> list[dict[str, float]]:
        return [{k: v - old.get(k, 0.0) for k, v in _metrics(url).items()
                 if v != old.get(k, 0.0)} for url, old in zip((ours.url, theirs.url), before)]
    # vLLM updates its counters from its output loop: wait (at most 10 s) until they settle.
    deadline = time.monotonic() + 10
    mine, vllms = deltas()
    while mine != vllms and time.monotonic() < deadline:
        time.sleep(0.5)
        mine, vllms = deltas()
    assert vllms, "vLLM counted nothing"
    assert mine == vllms
