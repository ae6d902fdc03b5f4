"""minimax_m2: <invoke name="…"> calls with <parameter name="…"> arguments."""
from __future__ import annotations

import json

from tests.unit.text.tool_parsers.conftest import stream
from text.tool_parsers import get_tool_parser

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"n": {"type": "number"}, "s": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "g"}}]


def make(vocab):
    return get_tool_parser("minimax_m2")(vocab, TOOLS)


def test_quoting_styles_and_typing(vocab):
    text = ('ok<minimax:tool_call>\n<invoke name="f">\n<parameter name="n">2.5</parameter>\n'
            "<parameter name='s'>x</parameter>\n</invoke>\n<invoke name=g></invoke>\n"
            "</minimax:tool_call>")
    out = make(vocab).extract(text)
    assert [(c.name, json.loads(c.arguments)) for c in out.calls] == [
        ("f", {"n": 2.5, "s": "x"}), ("g", {})]
    assert out.content == "ok"


def test_unknown_names_are_dropped_and_stray_closers_too(vocab):
    out = make(vocab).extract('a</minimax:tool_call>b<invoke name="h"></invoke>')
    assert not out.called and out.content == "ab"


def test_stream_equals_whole(vocab, marker_tok):
    text = '<minimax:tool_call><invoke name="f"><parameter name="s">hello</parameter></invoke>'
    got = stream(make(vocab), marker_tok, text)
    assert got["calls"][0]["arguments"] == make(vocab).extract(text).calls[0].arguments
