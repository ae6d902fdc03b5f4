"""Beam-search requests (``resources.common.beam``): what converts, the step request vLLM sends,
the checks vLLM runs (and the sampling checks it does not), and the answer's choices."""
from __future__ import annotations

import msgspec
import pytest

from resources.chat.convert import prepare_chat
from resources.chat.render import ChatStreamRenderer
from resources.common.beam import beam_state
from resources.completions import prepare_completion
from resources.completions.render import render_completion_response
from streaming.beam_search import BeamSearch
from tests.support.errors import raised

USER = [{"role": "user", "content": "Hi"}]


def prep(ctx, **body):
    return prepare_completion({"model": "tiny", "use_beam_search": True, **body}, ctx)


def test_one_choice_per_prompt_and_a_one_token_step_request(ctx):
    p = prep(ctx, prompt=["a b", "c d e"], n=3, max_tokens=5, temperature=0.5,
             length_penalty=0.7, include_stop_str_in_output=True)
    assert [c.prompt_index for c in p.choices] == [0, 1]
    plan = p.beam
    assert [s.max_tokens for s in plan.settings] == [5, 5]
    s = plan.settings[0]
    assert (s.width, s.length_penalty, s.include_stop_str_in_output, s.ignore_eos) == (
        3, 0.7, True, False)
    assert s.eos_token_id == ctx.tokenizer.eos_token_id
    wire = msgspec.msgpack.decode(msgspec.msgpack.encode(plan.step_params))
    assert wire["max_tokens"] == 1 and wire["logprobs"] == 6
    assert wire["temperature"] == 0.5 and wire["detokenize"] is False
    assert wire["watermarking"] is False


def test_sampling_checks_do_not_apply(ctx):
    """vLLM builds no SamplingParams from the request: greedy with n > 1, a bad top_p, stop
    strings and penalties are not checked (nor used)."""
    p = prep(ctx, prompt="x", n=2, temperature=0, top_p=7, presence_penalty=9, stop=["a"],
             min_tokens=99)
    wire = msgspec.msgpack.decode(msgspec.msgpack.encode(p.beam.step_params))
    assert wire.get("top_p", 1.0) == 1.0 and "stop" not in wire and "min_tokens" not in wire


@pytest.mark.parametrize("body, message", [
    ({"n": 0}, b"beam_width must be at least 1, got 0."),
    ({"n": 11}, b"Requested sample logprobs of 22, which is greater than max allowed: 20"),
    ({"temperature": -1}, b"temperature must be non-negative, got -1.0."),
    ({"stream": True}, b"Streaming is not currently supported with beam search"),
    ({"logprob_token_ids": [1], "logprobs": 1},
     b"`logprob_token_ids` is not supported with beam search."),
    ({"echo": True, "logprobs": 1},
     b"`echo` with `logprobs` is not supported with beam search because beam search does "
     b"not compute prompt logprobs."),
])
def test_refusals_are_vllms(ctx, body, message):
    status, text = raised(prepare_completion, {"model": "tiny", "prompt": "x",
                                               "use_beam_search": True, **body}, ctx)
    assert status == 400 and message in text


def test_chat_beam_search_plans_whole_and_streamed(ctx):
    p = prepare_chat({"model": "tiny", "messages": USER, "use_beam_search": True, "n": 2,
                      "max_tokens": 3}, ctx)
    assert p.beam is not None and len(p.choices) == 1 and p.n == 2 and not p.stream
    p = prepare_chat({"model": "tiny", "messages": USER, "stream": True, "use_beam_search": True,
                      "stream_options": {"include_usage": True}}, ctx)
    assert p.beam is not None and p.stream and p.include_usage and not p.continuous_usage
    status, text = raised(prepare_chat, {"model": "tiny", "messages": USER, "logprobs": True,
                                         "logprob_token_ids": [1], "use_beam_search": True}, ctx)
    assert b"`logprob_token_ids` is not supported with beam search." in text


def test_the_answer_numbers_beams_across_prompts(ctx):
    p = prep(ctx, prompt=["a", "b"], n=2, max_tokens=1, return_token_ids=True)
    searches = [BeamSearch(c.prompt_token_ids, s) for c, s in zip(p.choices, p.beam.settings)]
    a, b = ctx.tokenizer.encode("A", False)[0], ctx.tokenizer.encode("B", False)[0]
    searches[0].advance([{a: (-0.5, 1), b: (-1.0, 2)}])
    searches[1].advance([{b: (-0.1, 1)}])   # one candidate only: one beam
    body = msgspec.json.decode(render_completion_response(p, beam_state(p, ctx, searches)))
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert [c["token_ids"] for c in body["choices"]] == [[a], [b], [b]]
    assert [c["text"] for c in body["choices"]] == ["A", "B", "B"]
    assert {c["finish_reason"] for c in body["choices"]} == {"length"}
    assert body["usage"]["completion_tokens"] == 3
    assert body["usage"]["prompt_tokens"] == 2 * len(p.choices[0].prompt_token_ids)


def test_a_streamed_chat_sends_a_role_chunk_per_requested_choice_then_each_beam(ctx):
    p = prepare_chat({"model": "tiny", "messages": USER, "use_beam_search": True, "n": 3,
                      "max_tokens": 1, "stream": True, "logprobs": True,
                      "stream_options": {"include_usage": True}}, ctx)
    search = BeamSearch(p.choices[0].prompt_token_ids, p.beam.settings[0])
    a, b = ctx.tokenizer.encode("A", False)[0], ctx.tokenizer.encode("B", False)[0]
    search.advance([{a: (-0.5, 1), b: (-1.0, 2)}])   # two candidates: two beams of three
    frames = ChatStreamRenderer(p, ctx).finished_frames(beam_state(p, ctx, [search]))
    events = frames.decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [msgspec.json.decode(e[len("data: "):]) for e in events[:-2]]
    assert [c["choices"][0]["index"] for c in chunks[:5]] == [0, 1, 2, 0, 1]
    assert [c["choices"][0]["delta"] for c in chunks[:3]] == [
        {"role": "assistant", "content": ""}] * 3
    assert [c["choices"][0]["delta"] for c in chunks[3:5]] == [{"content": "A"},
                                                               {"content": "B"}]
    assert [c["choices"][0]["finish_reason"] for c in chunks[3:5]] == ["length", "length"]
    assert chunks[3]["choices"][0]["logprobs"]["content"][0]["logprob"] == -0.5
    assert chunks[5]["choices"] == [] and chunks[5]["usage"]["completion_tokens"] == 2
    assert len(chunks) == 6
