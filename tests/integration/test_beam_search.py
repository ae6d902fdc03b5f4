"""Beam search (``use_beam_search``) through real gunicorn + simulator processes and the official
``openai`` client: completions (one prompt and a batch), chat (whole and streamed), the refusals,
the per-request metrics of its step requests, and clients that leave mid-search (whole and
streamed) leaving nothing in the engine."""
from __future__ import annotations

import json

import openai
import pytest
import requests

from tests.support.waiting import wait_for

BEAM = {"use_beam_search": True}


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def _logprob_sum(choice) -> float:
    return sum(choice.logprobs.token_logprobs)


def test_completion_returns_n_beams_best_first(client):
    out = client.completions.create(model="tiny", prompt="The capital of France is", n=3,
                                    max_tokens=4, logprobs=2, temperature=0,
                                    extra_body={**BEAM, "return_token_ids": True})
    assert [c.index for c in out.choices] == [0, 1, 2]
    ids = [tuple(c.token_ids) for c in out.choices]
    assert len(set(ids)) == 3                      # distinct beams
    assert all(len(i) == 4 for i in ids)
    assert {c.finish_reason for c in out.choices} == {"length"}
    sums = [_logprob_sum(c) for c in out.choices]
    assert sums == sorted(sums, reverse=True)      # equal lengths: ranked by cumulative logprob
    # Each position offers the 2 x n candidates the step asked the engine for (top-k shown: 2+1).
    assert all(len(top) == 3 for c in out.choices for top in c.logprobs.top_logprobs)
    assert out.usage.completion_tokens == 12
    assert out.usage.prompt_tokens == 6


def test_batch_prompts_number_their_beams_in_order(client):
    out = client.completions.create(model="tiny", prompt=["one two three", "four five"], n=2,
                                    max_tokens=3, extra_body={**BEAM, "return_token_ids": True})
    assert [c.index for c in out.choices] == [0, 1, 2, 3]
    assert out.choices[0].prompt_token_ids == out.choices[1].prompt_token_ids
    assert out.choices[2].prompt_token_ids == out.choices[3].prompt_token_ids
    assert out.choices[0].prompt_token_ids != out.choices[2].prompt_token_ids
    assert out.usage.prompt_tokens == (len(out.choices[0].prompt_token_ids)
                                       + len(out.choices[2].prompt_token_ids))
    assert out.usage.completion_tokens == 12


def test_length_penalty_and_echo_are_applied(client):
    out = client.completions.create(model="tiny", prompt="alpha beta", n=2, max_tokens=2,
                                    echo=True, extra_body={**BEAM, "length_penalty": 0.5})
    assert all(c.text.startswith("alpha beta") for c in out.choices)
    assert len(out.choices) == 2


def test_chat_returns_n_beams(client):
    out = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say something"}], n=2,
        max_tokens=3, logprobs=True, top_logprobs=1,
        extra_body={**BEAM, "return_token_ids": True})
    assert [c.index for c in out.choices] == [0, 1]
    assert all(c.message.role == "assistant" for c in out.choices)
    assert all(len(c.logprobs.content) == 3 for c in out.choices)
    # As vLLM: a beam's own token has no bytes (its steps are not detokenized); tops have.
    assert all(t.bytes is None and t.top_logprobs[0].bytes is not None
               for c in out.choices for t in c.logprobs.content)
    assert out.choices[0].token_ids != out.choices[1].token_ids
    assert out.usage.completion_tokens == 6
    sums = [sum(t.logprob for t in c.logprobs.content) for c in out.choices]
    assert sums == sorted(sums, reverse=True)


@pytest.mark.parametrize("path, body, message", [
    ("/v1/completions", {"prompt": "x", "stream": True},
     "Streaming is not currently supported with beam search"),
    ("/v1/completions", {"prompt": "x", "echo": True, "logprobs": 1},
     "`echo` with `logprobs` is not supported with beam search"),
    ("/v1/completions", {"prompt": "x", "logprobs": 1, "logprob_token_ids": [5]},
     "`logprob_token_ids` is not supported with beam search."),
    ("/v1/completions", {"prompt": "x", "n": 11},
     "Requested sample logprobs of 22, which is greater than max allowed: 20"),
])
def test_refusals(server, path, body, message):
    r = requests.post(server.url + path, json={"model": "tiny", **BEAM, **body}, timeout=30)
    assert r.status_code == 400
    assert message in r.json()["error"]["message"]


def _engine_requests(url: str) -> float:
    text = requests.get(url + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting")))


@pytest.mark.parametrize("path, extra", [
    ("/v1/completions", {"prompt": "a long search"}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a long search"}],
                              "stream": True}),
], ids=["completion", "streamed-chat"])
def test_a_client_that_leaves_mid_search_leaves_nothing_in_the_engine(server, path, extra):
    # 4,000 steps of 3 one-token requests each (tens of seconds): far longer than the client
    # waits and than the wait below.
    body = {"model": "tiny", "n": 3, "max_tokens": 4000, **BEAM, **extra}
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.post(server.url + path, json=body, timeout=(5, 1.0))
    assert wait_for(lambda: _engine_requests(server.url) == 0, timeout=15)
    # The search stopped: no later step put requests back in the engine.
    r = requests.post(server.url + "/v1/completions", timeout=30,
                      json={"model": "tiny", "prompt": "x", "max_tokens": 2, **BEAM})
    assert r.status_code == 200
    assert wait_for(lambda: _engine_requests(server.url) == 0, timeout=15)
    assert "Traceback" not in server.log()


CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "Say something"}],
        "temperature": 0, **BEAM}


def test_streamed_chat_sends_the_finished_beams_as_one_stream(client):
    body = {**CHAT, "n": 2, "max_tokens": 3}
    whole = client.chat.completions.create(**{k: v for k, v in body.items() if k in (
        "model", "messages", "n", "max_tokens", "temperature")}, extra_body={**BEAM})
    chunks = list(client.chat.completions.create(
        **{k: v for k, v in body.items() if k in ("model", "messages", "n", "max_tokens",
                                                   "temperature")},
        stream=True, stream_options={"include_usage": True},
        extra_body={**BEAM, "return_token_ids": True}))
    # vLLM's stream writer fed one finished output: a role chunk per choice, one chunk per beam
    # with its whole text and finish reason, then the usage chunk.
    assert [c.choices[0].delta.role for c in chunks[:2]] == ["assistant", "assistant"]
    beams = chunks[2:4]
    assert [c.choices[0].index for c in beams] == [0, 1]
    assert [c.choices[0].delta.content for c in beams] == [c.message.content
                                                          for c in whole.choices]
    assert all(c.choices[0].finish_reason == "length" for c in beams)
    assert [len(c.choices[0].token_ids) for c in beams] == [3, 3]
    assert chunks[4].choices == [] and chunks[4].usage.completion_tokens == 6
    assert chunks[4].usage.prompt_tokens == whole.usage.prompt_tokens
    assert len(chunks) == 5


def test_streamed_chat_frames_end_with_done(server):
    body = {**CHAT, "n": 1, "max_tokens": 2, "stream": True, "logprobs": True,
            "top_logprobs": 1, "stream_options": {"include_usage": True,
                                                  "continuous_usage_stats": True}}
    r = requests.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in r.text.split("\n\n") if f]
    assert frames[-1] == "data: [DONE]"
    beam = json.loads(frames[1][len("data: "):])
    assert beam["usage"]["completion_tokens"] == 2
    assert len(beam["choices"][0]["logprobs"]["content"]) == 2
    assert beam["choices"][0]["logprobs"]["content"][0]["bytes"] is None


def _metric_sum(url: str, prefix: str) -> float:
    text = requests.get(url + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(prefix))


def test_each_step_request_is_counted_as_vllm_counts_it(server):
    names = ("vllm:request_success_total", "vllm:request_params_n_count",
             "vllm:request_prompt_tokens_count", "vllm:request_generation_tokens_sum",
             "vllm:request_params_max_tokens_sum")
    before = {n: _metric_sum(server.url, n) for n in names}
    out = requests.post(server.url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "one two three", "n": 2, "max_tokens": 3, "ignore_eos": True,
        **BEAM}).json()
    assert len(out["choices"]) == 2
    after = {n: _metric_sum(server.url, n) for n in names}
    # Steps of 1, 2 and 2 beams: five one-token engine requests, each its own (n 1).
    assert {n: after[n] - before[n] for n in names} == {n: 5 for n in names}
