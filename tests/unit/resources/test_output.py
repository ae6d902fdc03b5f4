"""RequestState: stop handling (docs/text-parity.md §3), abort decisions, usage, logprobs formatting."""
from __future__ import annotations

import dataclasses
import json

import pytest

from engine.protocol import EngineCoreOutput, LogprobsLists, PrefillStats, encode_ndarray
from base.errors import ServerError
from base.jsonio import dumps
from resources.chat import prepare_chat
from resources.chat.render import render_chat_response
from streaming.output import RequestState
from resources.completions import prepare_completion
from resources.completions.render import render_completion_response

FRANCE = [3795, 115370, 73750, 4756, 27797, 35424, 4756, 27797]


def state_for(ctx, **body):
    p = prepare_completion({"model": "tiny", "prompt": "The capital of France is",
                            "temperature": 0, **body}, ctx)
    return p, RequestState(p, ctx)


def feed(state, tokens, finish=None, stop_reason=None, index=0):
    return state.add(index, EngineCoreOutput("r", list(tokens), finish_reason=finish,
                                             stop_reason=stop_reason))


def final_text(p, state):
    body = render_completion_response(p, state).decode()
    return body.split('"text":"')[1].split('","logprobs"')[0]


@pytest.mark.parametrize("extra,tokens,finish,text", [
    ({}, [2], 0, ""),
    ({"skip_special_tokens": False}, [2], 0, ""),
    ({"skip_special_tokens": False, "include_stop_str_in_output": True}, [2], 0, "</s>"),
    ({"ignore_eos": True, "max_tokens": 4}, [2, 2, 2, 2], 1, ""),
    ({"ignore_eos": True, "skip_special_tokens": False}, [2, 2, 2, 2], 1, "</s></s></s></s>"),
    ({"min_tokens": 2}, [3795, 115370, 2], 0, ":** нельзя"),
])
def test_eos_handling(ctx, extra, tokens, finish, text):
    p, state = state_for(ctx, **extra)
    for i, t in enumerate(tokens):
        feed(state, [t], finish if i == len(tokens) - 1 else None)
    assert final_text(p, state) == text
    assert state.choices[0].token_ids == tokens and state.completion_tokens() == len(tokens)
    assert state.choices[0].stop_reason is None


def test_stop_token_ids(ctx):
    for include, text in ((False, ":** нельзя"), (True, ":** нельзя bern")):
        p, state = state_for(ctx, stop_token_ids=[73750], include_stop_str_in_output=include)
        feed(state, FRANCE[:2])
        delta = feed(state, [73750], finish=0, stop_reason=73750)
        assert (delta.finish_reason, delta.stop_reason, delta.abort_engine) == ("stop", 73750,
                                                                                 False)
        assert final_text(p, state) == text


def test_stop_string_aborts_running_engine(ctx):
    p, state = state_for(ctx, stop=["bern"], stream=True)
    deltas = [feed(state, [t]) for t in FRANCE[:3]]
    assert [d.text for d in deltas] == ["", ":** нел", "ьзя "]  # 3 chars held back
    last = deltas[-1]
    assert (last.finish_reason, last.stop_reason, last.abort_engine) == ("stop", "bern", True)
    assert feed(state, [FRANCE[3]]) is None  # late outputs are dropped
    assert state.all_finished and state.completion_tokens() == 3


def test_stop_on_last_allowed_token_needs_no_abort(ctx):
    _, state = state_for(ctx, stop=["bern"], max_tokens=3)
    feed(state, FRANCE[:2])
    delta = feed(state, [FRANCE[2]], finish=1)
    assert (delta.finish_reason, delta.stop_reason, delta.abort_engine) == ("stop", "bern", False)


def test_multi_token_step_cut_after_stop(ctx):
    p, state = state_for(ctx, stop=["bern"])
    delta = feed(state, FRANCE[:5])
    assert delta.token_ids == FRANCE[:3] and delta.abort_engine
    assert final_text(p, state) == ":** нельзя "


def test_error_and_abort_finishes(ctx):
    _, state = state_for(ctx)
    with pytest.raises(ServerError) as info:
        feed(state, [], finish=3)
    assert info.value.message == "Internal server error" and info.value.status == 500
    p, state = state_for(ctx)
    feed(state, [3795])
    assert feed(state, [], finish=2).finish_reason == "abort"
    assert '"finish_reason":"abort"' in render_completion_response(p, state).decode()


def test_usage_counts_prompts_once(ctx):
    p = prepare_completion({"prompt": ["Hello", "The capital of France is"], "n": 2,
                            "temperature": 0.5}, ctx)
    state = RequestState(p, ctx)
    for i in range(4):
        feed(state, [3795, 2], finish=0, index=i)
    assert list(state.usage().items()) == [("prompt_tokens", 8), ("total_tokens", 16),
                                           ("completion_tokens", 8),
                                           ("prompt_tokens_details", None),
                                           ("completion_tokens_details", None)]


def test_prompt_tokens_details(ctx):
    detailed = dataclasses.replace(ctx, enable_prompt_tokens_details=True)
    p = prepare_completion({"prompt": "x"}, detailed)
    state = RequestState(p, detailed)
    state.add(0, EngineCoreOutput("r", [5], finish_reason=1,
                                  prefill_stats=PrefillStats(num_cached_tokens=16)))
    assert ('"prompt_tokens_details":{"cached_tokens":16,"created_cache_tokens":null,'
            '"multimodal_tokens":null}') in render_completion_response(p, state).decode()


def lists(rows_ids, rows_lps, ranks):
    return LogprobsLists(encode_ndarray(rows_ids, "<i4"), encode_ndarray(rows_lps, "<f4"),
                         encode_ndarray(ranks, "<i8"))


def test_completion_logprobs_stream_and_body(ctx):
    p, state = state_for(ctx, logprobs=1, stream=True)
    d1 = state.add(0, EngineCoreOutput("r", [3795], new_logprobs=lists(
        [[3795, 3795, 7]], [[-0.5, -0.5, -1.5]], [1])))
    d2 = state.add(0, EngineCoreOutput("r", [115370], finish_reason=1, new_logprobs=lists(
        [[115370, 9, 115370]], [[-2.0, -0.25, -2.0]], [2])))
    assert dumps(d1.logprobs) == (b'{"text_offset":[0],"token_logprobs":[-0.5],"tokens":[":**"],'
                                  b'"top_logprobs":[{":**":-0.5}]}')
    assert dumps(d2.logprobs) == (
        '{"text_offset":[3],"token_logprobs":[-2.0],"tokens":[" нельзя"],'
        '"top_logprobs":[{" нельзя":-2.0,"[TOOL_CALLS]":-0.25}]}').encode()


def test_chat_logprobs_body_uses_python_floats(ctx):
    p = prepare_chat({"messages": [{"role": "user", "content": "Hi"}], "logprobs": True,
                      "top_logprobs": 1}, ctx)
    state = RequestState(p, ctx)
    state.add(0, EngineCoreOutput("r", [1065], finish_reason=1, new_logprobs=lists(
        [[1065, 1065]], [[-1.0000000116860974e-07, -1.0000000116860974e-07]], [1])))
    body = render_chat_response(p, state).decode()
    assert ('"logprobs":{"content":[{"token":"A","logprob":-1.0000000116860974e-07,"bytes":[65],'
            '"top_logprobs":[{"token":"A","logprob":-1.0000000116860974e-07,"bytes":[65]}]}]}'
            ) in body


def test_return_tokens_as_token_ids(ctx):
    p, state = state_for(ctx, logprobs=0, return_tokens_as_token_ids=True)
    state.add(0, EngineCoreOutput("r", [3795], finish_reason=1, new_logprobs=lists(
        [[3795, 5]], [[-0.5, -0.1]], [3])))
    body = render_completion_response(p, state).decode()
    assert ('"logprobs":{"text_offset":[0],"token_logprobs":[-0.5],"tokens":["token_id:3795"],'
            '"top_logprobs":[{"token_id:3795":-0.5}]}') in body


def test_stream_interval_batches_tokens(ctx):
    _, state = state_for(ctx, stream=True, stream_interval=3)
    got = [feed(state, [t], finish=1 if i == 5 else None) for i, t in enumerate(FRANCE[:6])]
    sent = [(d.text, d.token_ids) for d in got if d is not None]
    assert sent == [(":**", [3795]), (" нельзя bernKey", [115370, 73750, 4756]),
                    (" Execut", [27797, 35424])]  # trailing partial UTF-8 dropped


@pytest.mark.parametrize("server, request_interval, expected", [
    (3, None, 3), (3, 2, 3), (2, 3, 3), (1, None, 1)])
def test_server_stream_interval_is_raised_never_lowered_by_the_request(
        ctx, server, request_interval, expected):
    """``--stream-interval`` batches every stream; a request's own interval counts only when it
    is larger (vLLM's output processor takes the max of the two)."""
    served = dataclasses.replace(ctx, stream_interval=server)
    body = {"stream": True} if request_interval is None else {
        "stream": True, "stream_interval": request_interval}
    _, state = state_for(served, **body)
    got = [feed(state, [t], finish=1 if i == 6 else None) for i, t in enumerate(FRANCE[:7])]
    sizes = [len(d.token_ids) for d in got if d is not None]
    # the first token alone, then `expected` at a time, then the rest with the finishing step
    assert sizes[0] == 1 and all(n == expected for n in sizes[1:-1]) and sum(sizes) == 7
    assert len(sizes) == 1 + 6 // expected + (1 if 6 % expected else 0)


@pytest.mark.parametrize("seed", range(40))
def test_merged_steps_stream_the_same_text_and_finish_as_single_steps(ctx, seed):
    # A response that fell behind gets its pending steps merged (engine.stream); the text it
    # streams, and how it ends, must not depend on how the steps were grouped.
    import random

    from engine.stream import RequestStream, Waker

    rng = random.Random(seed)
    vocab = FRANCE + [2, 1010, 22177, 4304, 1044, 1032, 1261]
    tokens = [rng.choice(vocab) for _ in range(rng.randint(1, 24))]
    body = {"stream": True, "max_tokens": len(tokens), "ignore_eos": rng.random() < 0.5,
            "stop": rng.choice([[], ["bern"], ["нел", "Hello"], [" "]])}

    def run(group_sizes):
        p, state = state_for(ctx, **body)
        stream = RequestStream("r", 0, Waker(), lambda ids: None)
        text, finish, i = "", None, 0
        for size in group_sizes:
            for t in tokens[i:i + size]:
                i += 1
                last = i == len(tokens)
                stream.deliver(EngineCoreOutput("r", [t], finish_reason=1 if last else None))
            for output, frames in stream.take():
                delta = state.add(0, output, frames)
                if delta is not None:
                    text += delta.text
                    if delta.finish_reason is not None:
                        finish = (delta.finish_reason, delta.stop_reason)
            if state.all_finished:
                break
        return text, finish, state.completion_tokens()

    sizes = []
    while sum(sizes) < len(tokens):
        sizes.append(rng.randint(1, 6))
    assert run(sizes) == run([1] * len(tokens))


def test_kv_transfer_params_come_from_the_first_prompts_final_output(ctx):
    p = prepare_completion({"prompt": ["a", "b"], "max_tokens": 1}, ctx)
    state = RequestState(p, ctx)
    state.add(1, EngineCoreOutput("r-1", [5], finish_reason=1, kv_transfer_params={"p": 1}))
    assert state.kv_transfer_params is None  # the second prompt's results are not answered
    state.add(0, EngineCoreOutput("r-0", [5], finish_reason=1, kv_transfer_params={"p": 0},
                                  ec_transfer_params={"e": 0}))
    body = json.loads(render_completion_response(p, state))
    assert body["kv_transfer_params"] == {"p": 0} and body["ec_transfer_params"] == {"e": 0}
