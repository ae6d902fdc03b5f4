"""Beam search beside vLLM 0.32's own Python frontend, on the same real engine (``vllm serve``
with the tiny model, once with vLLM's frontend and once with greenfront as its frontend):
completions (one prompt and a batch) and chat answers with ``n`` 2 to 4, ``length_penalty``,
``max_tokens``, ``include_stop_str_in_output``, ``ignore_eos``, logprobs, echo, and vLLM's
refusals, compared field by field (ids, timestamps and the fingerprint aside)."""
from __future__ import annotations

import json

import pytest
import requests

from tests.interop.peers import requires_peers, serve_with_greenfront, serve_with_python_frontend

pytestmark = requires_peers
VARYING = ("id", "created", "system_fingerprint")


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    logs = tmp_path_factory.mktemp("beam-parity")
    theirs = serve_with_python_frontend(str(logs / "python.log"), ["--disable-log-stats"])
    try:
        theirs.wait_healthy()
        ours = serve_with_greenfront(str(logs / "greenfront.log"), ["--disable-log-stats"])
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
