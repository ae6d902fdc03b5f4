"""qwen3_xml / qwen3_coder: Qwen3-Coder's XML calls, whole and streamed."""
from __future__ import annotations

import json

import pytest

from tests.unit.text.tool_parsers.conftest import stream
from text.tool_parsers import get_tool_parser

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                     "metric": {"type": "boolean"}}}}}]


def call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


@pytest.fixture(params=["qwen3_xml", "qwen3_coder"])
def make(request, vocab):
    return lambda tools=TOOLS: get_tool_parser(request.param)(vocab, tools)


def test_values_are_typed_by_the_schema_and_content_stripped(make):
    out = make().extract("Sure.\n" + call("get_weather", city="Paris", days="3", metric="true"))
    assert [(c.name, json.loads(c.arguments)) for c in out.calls] == [
        ("get_weather", {"city": "Paris", "days": 3, "metric": True})]
    assert out.content == "Sure."


def test_without_a_schema_values_stay_strings(make):
    out = make(None).extract(call("f", n="3"))
    assert out.calls[0].arguments == '{"n": "3"}'


def test_parallel_calls_and_bare_function_tags(make):
    text = "<function=a>\n</function>\n<function=b>\n<parameter=x>\n1\n</parameter>\n</function>"
    out = make(None).extract(text)
    assert [(c.name, c.arguments) for c in out.calls] == [("a", "{}"), ("b", '{"x": "1"}')]


def test_an_open_parameter_ends_at_the_next(make):
    out = make(None).extract("<function=f>\n<parameter=a>\nx<parameter=b>\ny\n</function>")
    # the last parameter, never closed, is lost when the call ends (as in vLLM)
    assert json.loads(out.calls[0].arguments) == {"a": "x"}


def test_no_call_is_content(make):
    out = make().extract("It is <b>sunny</b>.")
    assert not out.called and out.content == "It is <b>sunny</b>."


def test_stream_equals_whole(make, marker_tok):
    text = "Let me check.\n" + call("get_weather", city="Paris", days="3") + "\n" + call(
        "get_weather", city="Oslo")
    got = stream(make(), marker_tok, text)
    whole = make().extract(text)
    assert got["content"] == "Let me check.\n\n"  # the text between the calls streams
    assert [(c["name"], c["arguments"]) for _, c in sorted(got["calls"].items())] == [
        (c.name, c.arguments) for c in whole.calls]
    assert all(c["id"] for c in got["calls"].values())


def test_truncated_call(make, marker_tok):
    # As vLLM 0.32: streamed, the arguments stop where the text did (no closing quote or brace);
    # whole, a parameter never closed is not an argument.
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar"
    assert stream(make(), marker_tok, text)["calls"][0]["arguments"] == '{"city": "Par'
    assert make().extract(text).calls[0].arguments == "{}"
