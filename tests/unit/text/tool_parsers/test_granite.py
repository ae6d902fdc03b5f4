"""granite: a JSON array after <|tool_call|> or <tool_call>, whole and streamed."""
from __future__ import annotations

import pytest

from tests.unit.text.tool_parsers.conftest import stream
from text.tool_parsers import get_tool_parser

W = '{"name": "get_weather", "arguments": {"city": "Paris", "n": [1, 2]}}'


def make(vocab):
    return get_tool_parser("granite")(vocab, None)


@pytest.mark.parametrize("marker", ["<|tool_call|>", "<tool_call>"])
def test_calls_keep_the_arguments_text_verbatim(vocab, marker):
    out = make(vocab).extract(f" Sure. {marker}[{W}, " '{"name": "t"}] tail')
    assert [(c.name, c.arguments) for c in out.calls] == [
        ("get_weather", '{"city": "Paris", "n": [1, 2]}'), ("t", "{}")]
    assert out.content == "Sure."


def test_no_array_after_the_marker_is_content(vocab):
    assert make(vocab).extract("<|tool_call|>not json").content == "not json"
    assert make(vocab).extract("plain").content == "plain"


def test_strings_may_hold_braces(vocab):
    out = make(vocab).extract('<|tool_call|>[{"name": "f", "arguments": {"a": "}]"}}]')
    assert out.calls[0].arguments == '{"a": "}]"}'


def test_stream_content_calls_and_trailing_text(vocab, marker_tok):
    got = stream(make(vocab), marker_tok, f"A <|tool_call|>[{W}] B")
    assert got["content"] == "A  B"
    assert got["calls"][0]["name"] == "get_weather"
    assert got["calls"][0]["arguments"] == '{"city": "Paris", "n": [1, 2]}'


def test_stream_of_a_truncated_call(vocab, marker_tok):
    got = stream(make(vocab), marker_tok, '<|tool_call|>[{"name": "f", "arguments": {"a": "Pa')
    assert got["calls"][0]["arguments"] == '{"a": "Pa'
