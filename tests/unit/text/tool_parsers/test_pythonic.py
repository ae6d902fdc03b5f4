"""pythonic / llama4_pythonic: Python lists of calls, whole and streamed."""
from __future__ import annotations

from tests.unit.text.tool_parsers.conftest import stream
from text.tool_parsers import get_tool_parser
from text.tool_parsers.pythonic import close_partial


def make(vocab, name="pythonic"):
    return get_tool_parser(name)(vocab, None)


def test_calls_with_literal_arguments(vocab):
    out = make(vocab).extract("[get_weather(city='Paris', d={'a': (1, -2)}, x=true, y=None), "
                              "now()]")
    assert [(c.name, c.arguments) for c in out.calls] == [
        ("get_weather", '{"city": "Paris", "d": {"a": [1, -2]}, "x": true, "y": null}'),
        ("now", "{}")]
    assert out.content is None


def test_not_a_call_list_is_content(vocab):
    for text in ("It is sunny.", "[get_weather('Paris')]", "[ f(x=1)]", "[f(x=g())]",
                 "[a.b(x=1)]"):
        out = make(vocab).extract(text)
        assert out.calls == [] and out.content == text, text


def test_stream_of_calls(vocab, marker_tok):
    got = stream(make(vocab), marker_tok, "[get_weather(city='Paris'), now(zone=\"CET\")]")
    assert [(c["name"], c["arguments"]) for c in got["calls"].values()] == [
        ("get_weather", '{"city": "Paris"}'), ("now", '{"zone": "CET"}')]


def test_stream_of_a_truncated_call(vocab, marker_tok):
    got = stream(make(vocab), marker_tok, "[get_weather(city='Par")
    assert got["calls"][0]["arguments"] == '{"city": "Par'


def test_llama4_wrapper(vocab, marker_tok):
    text = "<|python_start|>[get_weather(city='Paris')]<|python_end|>"
    assert make(vocab, "llama4_pythonic").extract(text).calls[0].name == "get_weather"
    got = stream(make(vocab, "llama4_pythonic"), marker_tok, text)
    assert got["calls"][0]["arguments"] == '{"city": "Paris"}'
    assert make(vocab, "pythonic").extract(text).calls == []


def test_closing_partial_python():
    assert close_partial("[f(a='x") == ("[f(a='x')]", "')]")
    assert close_partial("[f(a=") is None
    assert close_partial("[f(") is None
