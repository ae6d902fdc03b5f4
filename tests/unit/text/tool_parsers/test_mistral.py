"""mistral: [TOOL_CALLS]name[ARGS]{...}, whole and streamed."""
from __future__ import annotations

import re

from tests.unit.text.tool_parsers.conftest import stream
from text.tool_parsers import get_tool_parser


def make(vocab):
    return get_tool_parser("mistral")(vocab, None)


def test_calls_content_and_mistral_ids(vocab):
    out = make(vocab).extract('Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"} extra'
                              "[TOOL_CALLS]now{}")
    assert [(c.name, c.arguments) for c in out.calls] == [
        ("get_weather", '{"city": "Paris"}'), ("now", "{}")]
    assert out.content == "Sure."
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", c.id) for c in out.calls)


def test_whitespace_only_content_and_truncated_arguments(vocab):
    out = make(vocab).extract('  [TOOL_CALLS]f[ARGS]{"a": "b')
    assert out.content is None and out.calls[0].arguments == '{"a": "b'
    assert make(vocab).extract("no call").calls == []


def test_stream(vocab, marker_tok):
    got = stream(make(vocab), marker_tok, '  Hi[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g{"b": 2} x')
    assert got["content"] == "  Hi"
    assert [(c["name"], c["arguments"]) for c in got["calls"].values()] == [
        ("f", '{"a": 1}'), ("g", '{"b": 2} x')]


def test_stream_sends_no_whitespace_only_content(vocab, marker_tok):
    got = stream(make(vocab), marker_tok, ' [TOOL_CALLS]f[ARGS]{}')
    assert got["content"] == "" and got["calls"][0]["arguments"] == "{}"
