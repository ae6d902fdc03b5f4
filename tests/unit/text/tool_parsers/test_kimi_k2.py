"""kimi_k2: calls in a <|tool_calls_section_begin|> section, the header being the call's id."""
from __future__ import annotations

from tests.unit.text.tool_parsers.conftest import stream
from text.tool_parsers import get_tool_parser


def section(*calls: tuple[str, str]) -> str:
    body = "".join(f"<|tool_call_begin|>{header}<|tool_call_argument_begin|>{args}"
                   "<|tool_call_end|>" for header, args in calls)
    return f"<|tool_calls_section_begin|>{body}<|tool_calls_section_end|>"


def make(vocab):
    return get_tool_parser("kimi_k2")(vocab, None)


def test_header_gives_name_and_id(vocab):
    out = make(vocab).extract("Sure. " + section(("functions.get_weather:0", ' {"a": 1} '),
                                                 ("get_time:1", "")))
    assert [(c.name, c.arguments, c.id) for c in out.calls] == [
        ("get_weather", '{"a": 1}', "functions.get_weather:0"), ("get_time", "{}", "get_time:1")]
    assert out.content == "Sure. "  # not stripped around calls


def test_header_without_an_index_is_no_call(vocab):
    assert not make(vocab).extract(section(("get_weather", "{}"))).called


def test_stream_sends_the_raw_arguments(vocab, marker_tok):
    got = stream(make(vocab), marker_tok, section(("functions.f:0", '{"city": "Oslo"}')))
    assert got["calls"][0] == {"id": "functions.f:0", "name": "f",
                               "arguments": '{"city": "Oslo"}'}
