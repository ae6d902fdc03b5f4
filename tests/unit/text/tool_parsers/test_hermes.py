"""hermes: whole outputs and token-by-token streams, as vLLM 0.32's parser reads them."""
from __future__ import annotations

import json

from tests.unit.text.tool_parsers.conftest import accumulate, stream
from text.tool_parsers import get_tool_parser

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def parser(vocab):
    return get_tool_parser("hermes")(vocab, None)


def test_one_call_with_content_before_it(vocab):
    out = parser(vocab).extract("Let me check. " + CALL)
    assert out.content == "Let me check. "
    assert [(c.name, c.arguments) for c in out.calls] == [("get_weather", '{"city": "Paris"}')]


def test_arguments_are_reserialized_with_non_ascii_kept(vocab):
    out = parser(vocab).extract('<tool_call>{"name":"f","arguments":{"q":"Zürich","n":1}}'
                                "</tool_call>")
    assert out.content is None
    assert out.calls[0].arguments == '{"q": "Zürich", "n": 1}'


def test_parallel_calls_and_an_unclosed_last_call(vocab):
    text = CALL + '\n<tool_call>{"name": "get_time", "arguments": {}}'
    out = parser(vocab).extract(text)
    assert [c.name for c in out.calls] == ["get_weather", "get_time"]
    assert out.calls[1].arguments == "{}"


def test_no_call_and_invalid_json_leave_the_text_as_content(vocab):
    assert parser(vocab).extract("just text").calls == []
    broken = 'x <tool_call>{"name": "f", "argu'
    out = parser(vocab).extract(broken)
    assert out.calls == [] and out.content == broken


def test_stream_announces_the_name_then_streams_the_raw_arguments(vocab, marker_tok):
    got = stream(parser(vocab), marker_tok, "Sure " + CALL)
    assert got["content"] == "Sure "
    call = got["calls"][0]
    assert call["name"] == "get_weather" and call["id"].startswith("chatcmpl-tool-")
    assert call["arguments"] == '{"city": "Paris"}'


def test_stream_keeps_the_arguments_text_as_the_model_wrote_it(vocab, marker_tok):
    got = stream(parser(vocab), marker_tok,
                 '<tool_call>{"name":"f","arguments":{"a":[1,2]}}</tool_call>'
                 '<tool_call>{"name": "g", "arguments": {"b": "x"}}</tool_call>')
    assert got["content"] == ""
    assert [(c["name"], c["arguments"]) for c in got["calls"].values()] == [
        ("f", '{"a":[1,2]}'), ("g", '{"b": "x"}')]
    assert all(json.loads(c["arguments"]) for c in got["calls"].values())


def test_stream_of_a_truncated_call_sends_what_arrived(vocab, marker_tok):
    got = stream(parser(vocab), marker_tok, '<tool_call>{"name": "f", "arguments": {"a": "b')
    assert got["calls"][0]["name"] == "f"
    assert got["calls"][0]["arguments"] == '{"a": "b'


def test_stream_holds_back_a_partial_tag_and_sends_plain_text(vocab, marker_tok):
    p = parser(vocab)
    assert p.feed("a <tool", []).content == "a "
    assert p.feed("ing", []).content == "<tooling"


TRICKY = [
    CALL,
    'Hi <tool_call>\n{"name": "f", "arguments":   \n {"a": "x < y", "b": [1, {"c": 2}]}}\n'
    '</tool_call>\n<tool_call>{"name": "g", "arguments": {"s": "</tool"}}</tool_call> bye',
    '<tool_call>{"name": "f", "arguments": {"a": "}"} }  </tool_call><tool_call>{"name": "g",'
    ' "arguments": "<b>"}',
    '<tool_call>{"name": "f", "arguments": {"a": 1}}  \n  ',
    '<tool_call>{"name": "f", "arguments": </tool_call>',
]


def _deltas(vocab, pieces, full_scan):
    p = parser(vocab)
    out = []
    for piece in pieces:
        if full_scan:
            p._inside = None  # the fast path off: every delta takes the full scan
        d = p.feed(piece, [])
        out.append(None if d is None else (d.content, [
            (c.index, c.name, c.arguments) for c in d.tool_calls]))
    return out


def test_the_fast_path_inside_arguments_streams_what_the_full_scan_does(vocab):
    for text in TRICKY:
        for size in (1, 2, 3, 5, 8, 13):
            pieces = [text[i:i + size] for i in range(0, len(text), size)]
            assert _deltas(vocab, pieces, False) == _deltas(vocab, pieces, True), (text, size)


def test_deltas_of_any_size_stream_the_calls_that_extract_finds(vocab):
    # A response that fell behind takes many tokens as one delta: one delta may close a call
    # and open the next (its index then follows the closed one's, never skips one).
    call = ('<tool_call>\n{"name": "search_flights", "arguments": {"origin": "Paris", '
            '"passengers": 2}}\n</tool_call>\n')
    for text in ("Sure. " + call * 3, call * 4 + "<tool_call>\n{\"name\": \"f\", \"argu"):
        whole = parser(vocab).extract(text)
        for size in (1, 7, 40, 60, 131, 200, len(text)):
            p = parser(vocab)
            got = accumulate([p.feed(text[i:i + size]) for i in range(0, len(text), size)]
                             + [p.flush()])
            calls = [got["calls"][i] for i in sorted(got["calls"])]
            assert sorted(got["calls"]) == list(range(len(calls))), (size, got["calls"].keys())
            if whole.calls:
                assert [(c["name"], c["arguments"]) for c in calls] == [
                    (c.name, c.arguments) for c in whole.calls], size
