"""The marker-grammar machine's pieces: the lexer, the stable JSON prefix, schema typing."""
from __future__ import annotations

from text.tool_parsers.json_scan import stable_prefix, walk
from text.tool_parsers.markup import Grammar, Lexer
from text.tool_parsers.schema_types import coerce_arguments, coerce_text, streamable_string_keys

G = Grammar(terminals={"A": "<a>", "AB": "<ab>", "GT": ">"}, transitions={})


def test_lexer_prefers_the_earliest_then_the_longest_marker():
    assert Lexer(G).feed("x<ab>y>", final=True) == [(None, "x"), ("AB", "<ab>"), (None, "y"),
                                                      ("GT", ">")]


def test_lexer_holds_back_an_undecided_suffix():
    lexer = Lexer(G)
    assert lexer.feed("text <") == [(None, "text ")]
    assert lexer.feed("a") == []  # "<a" may still become "<ab>"
    assert lexer.feed(">") == [("A", "<a>")]
    assert lexer.feed("<", final=True) == [(None, "<")]


def test_stable_prefix_keeps_back_what_may_change():
    assert stable_prefix('{"a": "xy"}', None) == '{"a": "xy'
    assert stable_prefix('{"a": "xy"}', {"b"}) == '{"a": '
    assert stable_prefix('{"a": "x", "n": 12}', None) == '{"a": "x", "n": '
    assert stable_prefix('{}', None) == ""
    assert stable_prefix('{"a": "q\\"}"}', None) == '{"a": "q\\"}'


def test_walk_skips_brackets_inside_strings():
    kinds = [k for k, *_ in walk('{"a": "[}", "b": [1]}')]
    assert kinds == ["{", "string", ":", "string", ",", "string", ":", "[", "]", "}"]


def test_schema_typing():
    assert coerce_text("3", {"integer"}) == 3
    assert coerce_text("3.0", {"number"}) == 3
    assert coerce_text("1", {"boolean"}) is True
    assert coerce_text("null", {"string", "null"}) is None
    assert coerce_text("inf", {"number"}) == "inf"
    assert coerce_text("[1]", {"whatever"}) == [1]
    assert coerce_arguments('{"a": "1"}', {"a": {"type": "string"}}) == '{"a": "1"}'
    assert coerce_arguments('{"a": {"b": "2"}}', {"a": {"properties": {"b": {"type": "int"}}}}
                            ) == '{"a": {"b": 2}}'
    assert streamable_string_keys({"a": {"type": "string"}, "b": {"type": "integer"}}) == {"a"}
    assert streamable_string_keys({}) is None


def test_object_array_scan_gives_member_spans_and_stops_where_the_array_does():
    from text.tool_parsers.json_scan import scan_object_array
    text = '[{"name": "a", "n": 5, "p": {"x": "]}"}}, {"name": "b", "p": [1'
    elements, end = scan_object_array(text)
    assert end is None and [e.string(text, "name") for e in elements] == ["a", "b"]
    first = elements[0].members
    assert text[first["n"].start:first["n"].end] == "5"
    assert text[first["p"].start:first["p"].end] == '{"x": "]}"}'
    assert elements[0].end is not None and elements[1].end is None
    assert elements[1].members["p"].end is None
    assert scan_object_array('[{"a": 1}] tail')[1] == len('[{"a": 1}]')
    assert scan_object_array('[[1], {"name": "x"}]')[0] == []          # strict: stops
    assert len(scan_object_array('[[1], {"name": "x"}]', strict=False)[0]) == 1
