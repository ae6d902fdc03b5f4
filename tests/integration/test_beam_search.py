"""Beam search (``use_beam_search``) through real gunicorn + simulator processes and the official
``openai`` client: completions (one prompt and a batch), chat, the refusals, and a client that
leaves mid-search leaving nothing in the engine."""
from __future__ import annotations

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
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "stream": True},
     "not supported by this server (greenfront)"),
])
def test_refusals(server, path, body, message):
    r = requests.post(server.url + path, json={"model": "tiny", **BEAM, **body}, timeout=30)
    assert r.status_code == 400
    assert message in r.json()["error"]["message"]


def _engine_requests(url: str) -> float:
    text = requests.get(url + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting")))


def test_a_client_that_leaves_mid_search_leaves_nothing_in_the_engine(server):
    # 4,000 steps of 3 one-token requests each (tens of seconds): far longer than the client
    # waits and than the wait below.
    body = {"model": "tiny", "prompt": "a long search", "n": 3, "max_tokens": 4000, **BEAM}
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.post(server.url + "/v1/completions", json=body, timeout=(5, 1.0))
    assert wait_for(lambda: _engine_requests(server.url) == 0, timeout=15)
    # The search stopped: no later step put requests back in the engine.
    r = requests.post(server.url + "/v1/completions", timeout=30,
                      json={"model": "tiny", "prompt": "x", "max_tokens": 2, **BEAM})
    assert r.status_code == 200
    assert wait_for(lambda: _engine_requests(server.url) == 0, timeout=15)
    assert "Traceback" not in server.log()
