"""``GREENFRONT_TOKENS_ONLY=1`` (vLLM's ``--tokens-only``) on a real deployment: gunicorn, two
workers and the simulator in echo mode (it repeats the prompt after its first token).

What vLLM 0.32's Python frontend does in that mode (docs/parity.md §9): /inference/v1/generate
answers token ids only and refuses what needs text; the generation config's EOS id is a plain
stop id; the routes that need the tokenizer answer a 400; the legacy ``POST /abort_requests``
is served without the API key and listed in /openapi.json.
"""
from __future__ import annotations

import json
import threading

import pytest
import requests

from tests.integration.harness import deployment, wait_for

KEY = "sk-tokens"
GENERATE = "/inference/v1/generate"
PROMPT = [1, 22177, 1044, 1307]  # echo emits 22177, 1044, 1307, 22177, ...
AUTH = {"Authorization": f"Bearer {KEY}"}
NO_TOKENIZER = "Tokenizer not available when `skip_tokenizer_init=True`"


@pytest.fixture(scope="module")
def tokens_only(model_dir):
    with deployment(model_dir, workers=2,
                          sim_args="--output-mode echo --itl-ms 2 --ttft-ms 5",
                          env={"GREENFRONT_TOKENS_ONLY": "1", "GREENFRONT_API_KEY": KEY}) as srv:
        yield srv


def generate(server, body, **kw):
    return requests.post(server.url + GENERATE, json=body, headers=AUTH, timeout=30, **kw)


def test_generate_answers_token_ids(tokens_only):
    r = generate(tokens_only, {"token_ids": PROMPT, "sampling_params": {
        "max_tokens": 4, "logprobs": 1, "prompt_logprobs": 1, "detokenize": True}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["output_mode"] == "tokens"
    (choice,) = body["choices"]
    assert choice["token_ids"] == [22177, 1044, 1307, 22177] and "text" not in choice
    assert [e["token_id"] for e in choice["logprobs"]["content"]] == choice["token_ids"]
    # no detokenization, whatever the request asked: the prompt logprobs decode nothing
    assert all(entry["decoded_token"] is None
               for position in body["prompt_logprobs"][1:] for entry in position.values())


def test_generation_config_eos_is_a_stop_id(tokens_only):
    # echo emits the prompt's 2 (the generation config's eos_token_id): without a tokenizer vLLM
    # has no EOS id of its own, so 2 stops the request as a stop id, and says so
    r = generate(tokens_only, {"token_ids": [1, 22177, 2, 1044],
                               "sampling_params": {"max_tokens": 6}})
    (choice,) = r.json()["choices"]
    assert choice["token_ids"] == [22177, 2]
    assert (choice["finish_reason"], choice["stop_reason"]) == ("stop", 2)
    r = generate(tokens_only, {"token_ids": [1, 22177, 2, 1044],
                               "sampling_params": {"max_tokens": 4, "ignore_eos": True}})
    (choice,) = r.json()["choices"]
    assert (choice["finish_reason"], choice["stop_reason"]) == ("length", None)


def test_generate_stream(tokens_only):
    r = generate(tokens_only, {"token_ids": PROMPT, "stream": True,
                               "stream_options": {"include_usage": True},
                               "sampling_params": {"max_tokens": 3}})
    assert r.status_code == 200
    raw = r.content.decode()
    assert raw.endswith("data: [DONE]\n\n")
    chunks = [json.loads(e[len("data: "):]) for e in raw.split("\n\n")[:-2]]
    ids = [i for c in chunks for ch in c["choices"] for i in ch["token_ids"]]
    assert ids == [22177, 1044, 1307]
    assert chunks[-1]["usage"] == {"prompt_tokens": 4, "total_tokens": 7, "completion_tokens": 3}


@pytest.mark.parametrize("sampling, extra, message", [
    ({"stop": ["x"]}, {}, "stop strings are not supported on a --tokens-only server because "
     "detokenization is disabled. Check stop strings on the coordinator, or use "
     "stop_token_ids."),
    ({}, {"output_mode": "text"}, "output_mode='text' requires a tokenizer, but this server does "
     "not load one (--tokens-only or --skip-tokenizer-init). Send the request to a server that "
     "loads a tokenizer, or use output_mode='tokens'."),
    ({"structured_outputs": {"choice": ["a", "b"]}}, {},
     "Structured outputs requires a tokenizer so it can't be used with 'skip_tokenizer_init'"),
    ({"bad_words": ["x"]}, {}, None),
])
def test_generate_refuses_what_needs_text(tokens_only, sampling, extra, message):
    r = generate(tokens_only, {"token_ids": PROMPT,
                               "sampling_params": {"max_tokens": 2, **sampling}, **extra})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "BadRequestError"
    assert error["message"] == message if message else "bad_words" in error["message"]


@pytest.mark.parametrize("path, body, anthropic", [
    ("/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 2}, False),
    ("/v1/completions", {"prompt": "hello", "max_tokens": 2}, False),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, False),
    ("/v1/responses", {"input": "hi"}, False),
    ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}, True),
    ("/v1/messages/count_tokens", {"messages": [{"role": "user", "content": "hi"}]}, True),
    ("/tokenize", {"prompt": "hello"}, False),
    ("/detokenize", {"tokens": [1, 2]}, False),
])
def test_text_routes_answer_vllms_400(tokens_only, path, body, anthropic):
    r = requests.post(tokens_only.url + path, json={"model": "tiny", **body}, headers=AUTH,
                      timeout=30)
    assert r.status_code == 400, r.text
    if anthropic:
        assert r.json() == {"type": "error",
                            "error": {"type": "BadRequestError", "message": NO_TOKENIZER}}
    else:
        assert r.json() == {"error": {"message": NO_TOKENIZER, "type": "BadRequestError",
                                      "param": None, "code": 400}}


def test_the_key_is_checked_before_the_tokenizer(tokens_only):
    r = requests.post(tokens_only.url + "/v1/completions", json={"prompt": "x"}, timeout=30)
    assert r.status_code == 401


def test_other_routes_answer_as_usual(tokens_only):
    assert requests.get(tokens_only.url + "/v1/models", headers=AUTH,
                        timeout=10).json()["data"][0]["id"] == "tiny"
    assert requests.get(tokens_only.url + "/health", timeout=10).status_code == 200
    assert requests.get(tokens_only.url + "/load", timeout=10).json() == {"server_load": 0}


def _abort_through(server, path: str, headers: dict) -> dict:
    """A long stream aborted by ``path``: its last chunk."""
    box: dict = {}

    def run() -> None:
        box["r"] = generate(server, {"token_ids": PROMPT, "stream": True, "request_id": path,
                                     "sampling_params": {"max_tokens": 3000, "ignore_eos": True}},
                            stream=True)
        box["raw"] = box["r"].content.decode()
    thread = threading.Thread(target=run)
    thread.start()
    load = lambda: requests.get(server.url + "/load", timeout=10).json()["server_load"]  # noqa: E731
    assert wait_for(lambda: load() >= 1)
    r = requests.post(server.url + path, json={"request_ids": [f"generate-tokens-{path}"]},
                      headers=headers, timeout=10)
    assert r.status_code == 200 and r.content == b""
    thread.join(30)
    raw = box["raw"]
    assert raw.endswith("data: [DONE]\n\n")
    return json.loads(raw.split("\n\n")[-3][len("data: "):])


@pytest.mark.parametrize("path, headers", [("/abort_requests", {}),
                                           ("/inference/v1/abort_requests", AUTH)])
def test_abort_requests_routes(tokens_only, path, headers):
    last = _abort_through(tokens_only, path, headers)
    assert last["choices"][0]["finish_reason"] == "abort"


def test_legacy_abort_route_needs_no_key_and_checks_its_body(tokens_only):
    url = tokens_only.url + "/abort_requests"
    assert requests.post(url, json={"request_ids": ["none"]}, timeout=10).status_code == 200
    r = requests.post(url, data=b"nojson", timeout=10)
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("JSON decode error: ")
    r = requests.post(url, json={}, timeout=10)
    assert (r.status_code, r.json()["error"]["message"]) == (
        400, "Missing 'request_ids' in request body")
    # the scale-out path keeps the key
    r = requests.post(tokens_only.url + "/inference/v1/abort_requests",
                      json={"request_ids": ["x"]}, timeout=10)
    assert r.status_code == 401


def test_openapi_lists_the_legacy_route(tokens_only):
    paths = requests.get(tokens_only.url + "/openapi.json", timeout=10).json()["paths"]
    assert "post" in paths["/abort_requests"]
    assert "post" in paths["/inference/v1/abort_requests"]
    assert paths["/abort_requests"]["post"]["operationId"] != (
        paths["/inference/v1/abort_requests"]["post"]["operationId"])


def test_without_the_setting_there_is_no_legacy_route(server):
    r = requests.post(server.url + "/abort_requests", json={"request_ids": ["x"]}, timeout=10)
    assert r.status_code == 404
    assert "/abort_requests" not in requests.get(server.url + "/openapi.json",
                                                 timeout=10).json()["paths"]
