"""glm45 / glm47: GLM's <tool_call>NAME<arg_key>…</arg_key><arg_value>…</arg_value></tool_call>."""
from __future__ import annotations

import json

import pytest

from tests.unit.text.tool_parsers.conftest import stream
from text.tool_parsers import get_tool_parser

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "get_time"}}]


def call(name: str, **args: str) -> str:
    pairs = "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in args.items())
    return f"<tool_call>{name}{pairs}</tool_call>"


@pytest.fixture(params=["glm45", "glm47"])
def make(request, vocab):
    return lambda: get_tool_parser(request.param)(vocab, TOOLS)


def test_pairs_are_typed_and_names_stripped(make):
    out = make().extract("Sure. " + call("get_weather\n", city="Paris", days="2") +
                         call("get_time"))
    assert [(c.name, json.loads(c.arguments)) for c in out.calls] == [
        ("get_weather", {"city": "Paris", "days": 2}), ("get_time", {})]
    assert out.content == "Sure."


def test_a_call_naming_no_tool_is_dropped(make):
    out = make().extract(call("nope", a="1"))
    assert not out.called


def test_stream_equals_whole(make, marker_tok):
    text = "A " + call("get_weather", city="Paris", days="2")
    got = stream(make(), marker_tok, text)
    assert got["content"] == "A "
    assert (got["calls"][0]["name"], got["calls"][0]["arguments"]) == (
        "get_weather", '{"city": "Paris", "days": 2}')


def test_required_and_named_use_the_format(make):
    assert make().supports_required_and_named is False
