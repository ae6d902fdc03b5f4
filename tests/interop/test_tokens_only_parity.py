"""``vllm serve --tokens-only`` with greenfront as its frontend (two workers) beside ``vllm serve
--tokens-only`` with vLLM 0.32's own Python frontend, both on real CPU engines (which then load
no tokenizer, ``skip_tokenizer_init``): docs/parity.md §9.

Compared: /inference/v1/generate answers field by field (``request_id`` and ``created`` aside),
streamed and not, and its refusals; the legacy ``/abort_requests`` and
``/inference/v1/abort_requests``; what the other routes answer, with greenfront's documented
differences asserted as such.
"""
from __future__ import annotations

import json

import pytest
import requests

from tests.interop.peers import requires_peers, serve_with_greenfront, serve_with_python_frontend
from tests.support.normalize import first_equal

pytestmark = requires_peers

GENERATE = "/inference/v1/generate"
PROMPT = [1, 22177, 1044, 1307]
NO_TOKENIZER = "Tokenizer not available when `skip_tokenizer_init=True`"


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    logs = tmp_path_factory.mktemp("tokens-only")
    ours = serve_with_greenfront(str(logs / "greenfront.log"), ["--tokens-only"], workers=2)
    theirs = serve_with_python_frontend(str(logs / "python.log"), ["--tokens-only"])
    try:
        yield ours.wait_healthy(), theirs.wait_healthy()
    finally:
        ours.kill()
        theirs.kill()


def _masked(value):
    if isinstance(value, dict):
        return {k: "*" if k in ("request_id", "created") else _masked(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _both(stacks, path, body, **kw):
    return [requests.post(s.url + path, json=body, timeout=120, **kw) for s in stacks]


def _sampling(**extra):
    return {"temperature": 0, "max_tokens": 5, **extra}


BODIES = [
    {"model": "tiny", "token_ids": PROMPT, "sampling_params": _sampling()},
    {"token_ids": PROMPT, "sampling_params": _sampling(logprobs=2, prompt_logprobs=1),
     "return_token_ids": True},
    {"token_ids": PROMPT, "sampling_params": _sampling(detokenize=True, stop=[])},
    # the generation config's EOS (2) is a plain stop id without a tokenizer: stop_reason 2
    {"token_ids": PROMPT, "sampling_params": _sampling(min_tokens=2, logit_bias={"2": 100})},
    {"token_ids": PROMPT, "sampling_params": _sampling(ignore_eos=True, logit_bias={"2": 100})},
    {"token_ids": PROMPT, "sampling_params": _sampling(max_tokens=8)},
]


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_generate_bodies_field_by_field(stacks, body):
    ours, theirs = _both(stacks, GENERATE, body)
    assert ours.status_code == theirs.status_code == 200, (ours.text, theirs.text)
    mine, vllms = _masked(ours.json()), _masked(theirs.json())
    assert list(mine) == list(vllms)
    for key in vllms:
        assert mine[key] == vllms[key], key


def _chunks(r) -> list:
    raw = r.content.decode()
    assert raw.endswith("data: [DONE]\n\n"), raw
    return [_masked(json.loads(e[len("data: "):])) for e in raw.split("\n\n")[:-2]]


@pytest.mark.parametrize("body", [
    {"token_ids": PROMPT, "sampling_params": _sampling(max_tokens=3)},
    {"token_ids": PROMPT, "sampling_params": _sampling(stop_token_ids=[73549], logprobs=1),
     "stream_options": {"include_usage": True}, "return_token_ids": True},
], ids=["plain", "stop-id-logprobs-usage"])
def test_generate_streams_chunk_by_chunk(stacks, body):
    ours, theirs = stacks
    body = {**body, "stream": True}
    mine, vllms = first_equal(lambda: _chunks(_both([ours], GENERATE, body)[0]),
                              lambda: _chunks(_both([theirs], GENERATE, body)[0]))
    assert mine == vllms


@pytest.mark.parametrize("body", [
    {"token_ids": PROMPT, "sampling_params": _sampling(stop=["a"])},
    {"token_ids": PROMPT, "sampling_params": _sampling(), "output_mode": "text"},
    {"token_ids": PROMPT, "sampling_params": _sampling(structured_outputs={"choice": ["a"]})},
    {"token_ids": PROMPT, "sampling_params": _sampling(detokenize=False),
     "output_mode": "text"},
], ids=["stop-strings", "text-mode", "structured-outputs", "text-without-detokenize"])
def test_generate_refusals_as_vllm(stacks, body):
    ours, theirs = _both(stacks, GENERATE, body)
    assert theirs.status_code == 400, theirs.text
    assert (ours.status_code, ours.json()) == (400, theirs.json())


def test_bad_words_refused_where_vllm_drops_them(stacks):
    ours, theirs = _both(stacks, GENERATE, {"token_ids": PROMPT,
                                            "sampling_params": _sampling(bad_words=["a"])})
    assert theirs.status_code == 200  # vLLM has no tokenizer to apply them with: ignored
    assert ours.status_code == 400 and "bad_words" in ours.json()["error"]["message"]


TEXT_ROUTES = [
    ("/v1/completions", {"prompt": "hello", "max_tokens": 2}),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 2}),
    ("/v1/messages/count_tokens", {"messages": [{"role": "user", "content": "hi"}]}),
    ("/tokenize", {"prompt": "hello"}),
    ("/detokenize", {"tokens": [1, 2, 3]}),
]


@pytest.mark.parametrize("path, body", TEXT_ROUTES, ids=[p for p, _ in TEXT_ROUTES])
def test_text_routes_answer_vllms_400(stacks, path, body):
    ours, theirs = _both(stacks, path, {"model": "tiny", **body})
    assert theirs.status_code == 400, theirs.text
    assert (ours.status_code, ours.json()) == (400, theirs.json())


@pytest.mark.parametrize("path, anthropic", [("/v1/chat/completions", False),
                                             ("/v1/messages", True)])
def test_chat_and_messages_400_where_vllm_fails_500(stacks, path, anthropic):
    ours, theirs = _both(stacks, path, {"model": "tiny", "max_tokens": 2,
                                        "messages": [{"role": "user", "content": "hi"}]})
    assert theirs.status_code == 500  # vLLM: an empty InternalServerError
    assert ours.status_code == 400
    message = ours.json()["error"]["message"]
    assert message == NO_TOKENIZER and (ours.json().get("type") == "error") == anthropic


def test_token_prompt_completions_refused_where_vllm_answers_empty_text(stacks):
    ours, theirs = _both(stacks, "/v1/completions",
                         {"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 2})
    assert theirs.status_code == 200 and theirs.json()["choices"][0]["text"] == ""
    assert (ours.status_code, ours.json()["error"]["message"]) == (400, NO_TOKENIZER)


def test_other_routes_as_vllm(stacks):
    ours, theirs = stacks
    for path in ("/v1/models", "/load", "/health"):
        mine = requests.get(ours.url + path, timeout=30)
        vllms = requests.get(theirs.url + path, timeout=30)
        assert mine.status_code == vllms.status_code == 200, path
    assert (requests.get(ours.url + "/v1/models", timeout=30).json()["data"][0]["id"]
            == requests.get(theirs.url + "/v1/models", timeout=30).json()["data"][0]["id"])
    for stack in stacks:
        paths = requests.get(stack.url + "/openapi.json", timeout=30).json()["paths"]
        assert "post" in paths["/abort_requests"] and "post" in paths[
            "/inference/v1/abort_requests"]


@pytest.mark.parametrize("path", ["/abort_requests", "/inference/v1/abort_requests"])
def test_abort_requests_bodies_as_vllm(stacks, path):
    for data in (b'{"request_ids": ["none"]}', b"nojson", b"{}"):
        ours, theirs = [requests.post(s.url + path, data=data, timeout=30,
                                      headers={"Content-Type": "application/json"})
                        for s in stacks]
        assert ours.status_code == theirs.status_code, data
        assert ours.content == theirs.content, data


def _aborted_stream(stack, path: str) -> dict:
    """A long greedy stream aborted through ``path`` once its first chunk came: its last
    chunk, masked."""
    rid = "abort-" + path.strip("/").replace("/", "-")
    r = requests.post(stack.url + GENERATE, timeout=120, stream=True, json={
        "token_ids": PROMPT, "stream": True, "request_id": rid,
        "sampling_params": _sampling(max_tokens=1800, ignore_eos=True)})
    events = (line for line in r.iter_lines() if line)
    assert next(events).startswith(b"data: {"), r.status_code
    stop = requests.post(stack.url + path, json={"request_ids": [f"generate-tokens-{rid}"]},
                         timeout=30)
    assert (stop.status_code, stop.content) == (200, b"")
    rest = [line.decode()[len("data: "):] for line in events]
    assert rest[-1] == "[DONE]", rest[-3:]
    last = _masked(json.loads(rest[-2]))
    last["choices"][0].pop("token_ids")  # how far each got before the abort
    last["choices"][0].pop("weight_versions", None)
    return last


@pytest.mark.parametrize("path", ["/abort_requests", "/inference/v1/abort_requests"])
def test_abort_ends_a_stream_as_vllm(stacks, path):
    mine, vllms = (_aborted_stream(stack, path) for stack in stacks)
    assert mine == vllms
    assert vllms["choices"][0]["finish_reason"] == "abort"
