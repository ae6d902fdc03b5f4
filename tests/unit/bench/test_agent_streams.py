"""The load generator's token accounting of the agent scenarios, on recorded streams.

``sse/*.sse`` are greenfront's answers (simulator in echo mode) to a 12-token request of each
API, recorded byte for byte: a chat stream with continuous usage stats, a Responses stream whose
10 text deltas carry 12 tokens (the echo's BOS and ``[INST]`` have no text) and a Messages
stream with 11. Each is fed to a real stream exchange in pieces cut anywhere, as reads arrive.
"""
from __future__ import annotations

import os
import random
from typing import Any

import pytest

from bench import agent_streams, loadgen

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sse")


def _recorded(name: str) -> bytes:
    with open(os.path.join(HERE, f"{name}.sse"), "rb") as f:
        return f.read()


def _run() -> loadgen._StreamRun:
    return loadgen._StreamRun({"host": "127.0.0.1", "port": 1, "model": "tiny", "seed": 0,
                               "t_begin": 0.0, "t0": 0.0, "t1": 1000.0, "concurrency": 1,
                               "ramp_s": 0.0, "min_tokens": 12, "max_tokens": 12})


def _feed(run: loadgen._StreamRun, api: str, data: bytes, cuts: list[int]) -> Any:
    """The stream in reads ending at ``cuts``; read i arrives at t = 10 + i."""
    ex = loadgen._StreamExchange(run, None, 9.0, 12, agent_streams.BY_NAME[api])
    ex.on_head(200, 9.5)
    start = 0
    for i, end in enumerate([*cuts, len(data)]):
        ex.on_body(data[start:end], 10.0 + i)
        start = end
    return ex


def _event_ends(data: bytes) -> list[int]:
    """Read boundaries just after each complete event: one event per read."""
    ends, at = [], data.find(b"\n\n")
    while at >= 0:
        ends.append(at + 2)
        at = data.find(b"\n\n", at + 2)
    return ends[:-1]


@pytest.mark.parametrize("api, deltas", [("responses", 10), ("messages", 11)])
def test_text_deltas_are_counted_and_reconciled_with_the_final_usage(api, deltas):
    data = _recorded(api)
    run = _run()
    ex = _feed(run, api, data, _event_ends(data))
    assert ex.events == deltas
    assert ex.tokens == 12 and run.tokens_in_window == 12 and run.seen_tokens == 12
    assert run.assumed_tokens == 0  # every token confirmed by the final usage
    assert not ex.failed_event
    # TTFT: the first text delta's read (events before it: created, in_progress, ...), one
    # token gap per token after the first: the reconciled ones arrive with the final usage.
    first = data.find(agent_streams.BY_NAME[api].delta_event)
    assert list(run.ttft) == [(10.0 + sum(1 for e in _event_ends(data) if e <= first) - 9.0)
                              * 1000]
    assert len(run.gaps) == 11 and list(run.gaps).count(0.0) == 12 - deltas


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_any_cut_of_the_bytes_counts_the_same_tokens(api):
    data = _recorded(api)
    rng = random.Random(7)
    for _ in range(50):
        run = _run()
        cuts = sorted(rng.sample(range(1, len(data)), rng.randint(1, 40)))
        ex = _feed(run, api, data, cuts)
        assert ex.tokens == 12 and run.tokens_in_window == 12
        assert run.assumed_tokens == 0 and len(run.ttft) == 1


def test_chat_counts_usage_not_chunks_and_its_role_chunk_is_no_token():
    data = _recorded("chat")
    run = _run()
    ex = _feed(run, "chat", data, _event_ends(data))
    assert ex.tokens == 12 and run.tokens_in_window == 12 and run.assumed_tokens == 0
    # The role chunk is the first event; the first token's chunk is the second.
    assert list(run.ttft) == [(11.0 - 9.0) * 1000]


def test_a_stream_cut_before_its_final_usage_stays_assumed():
    data = _recorded("responses")
    cut = data.find(b"event: response.output_text.done")
    run = _run()
    ex = _feed(run, "responses", data[:cut], [])
    assert ex.tokens == 10 and run.assumed_tokens == 10 and run.seen_tokens == 10


def test_a_failure_event_is_seen():
    run = _run()
    ex = _feed(run, "messages", _recorded("messages").replace(
        b"event: message_delta\n", b"event: error\n"), [])
    assert ex.failed_event


def test_request_bodies_ask_for_a_stream_of_max_tokens_without_ignore_eos():
    import json
    for api, limit in (("chat", "max_tokens"), ("responses", "max_output_tokens"),
                       ("messages", "max_tokens")):
        body = json.loads(agent_streams.BY_NAME[api].body("tiny", "Hello there.", 77))
        assert body["stream"] is True and body[limit] == 77 and body["temperature"] == 0
        assert "ignore_eos" not in body
    chat = json.loads(agent_streams.CHAT.body("tiny", "Hi", 5))
    assert chat["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
