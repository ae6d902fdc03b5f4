"""llama3_json / llama4_json: JSON objects (after <|python_tag|>), whole and streamed."""
from __future__ import annotations

import pytest

from tests.unit.text.tool_parsers.conftest import stream
from text.tool_parsers import get_tool_parser

W = '{"name": "get_weather", "parameters": {"city": "Paris", "n": 2}}'


@pytest.fixture(params=["llama3_json", "llama4_json"])
def make(request, vocab):
    return lambda: get_tool_parser(request.param)(vocab, None)


def test_one_and_parallel_calls_replace_the_content(make):
    out = make().extract("<|python_tag|>" + W + '; {"name": "t", "arguments": {}}')
    assert [(c.name, c.arguments) for c in out.calls] == [
        ("get_weather", '{"city": "Paris", "n": 2}'), ("t", "{}")]
    assert out.content is None
    assert make().extract("Here you go: " + W).content is None


def test_failures_leave_content(make):
    for text in ("plain text", '{"parameters": {}}', "{not json} " + W):
        out = make().extract(text)
        assert out.calls == [] and out.content == text


def test_stream_announces_then_streams_serialized_arguments(make, marker_tok):
    got = stream(make(), marker_tok, W + '; {"name": "t", "parameters": {"z": "a b"}}')
    assert [(c["name"], c["arguments"]) for c in got["calls"].values()] == [
        ("get_weather", '{"city": "Paris", "n": 2}'), ("t", '{"z": "a b"}')]


def test_stream_of_text_is_content(make, marker_tok):
    assert stream(make(), marker_tok, "Hi there")["content"] == "Hi there"


def test_stream_of_a_truncated_call_holds_back_unconfirmed_text(make, marker_tok):
    p = make()
    got = stream(p, marker_tok, '{"name": "f", "parameters": {"city": "Par')
    assert got["calls"][0]["name"] == "f"
    assert '{"city": "Par'.startswith(got["calls"][0]["arguments"])
    assert got["calls"][0]["arguments"] + p.finish() == '{"city": "Par"}'
