"""The per-choice chat pipeline (resources.chat.parsing): reasoning, then tools, whole and
streamed, for each tool_choice."""
from __future__ import annotations

import json

import pytest

from resources.chat.parsing import ChatParsing, ChoiceParser
from resources.chat.tool_choice import json_schema, scan_required
from tests.unit.text.tool_parsers.conftest import accumulate, token_deltas
from text.output_parsers import load_output_parsers

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "get_time"}}]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def setup(vocab, choice="auto", reasoning="qwen3", **kwargs):
    parsers = load_output_parsers(enable_auto_tool_choice=True, tool_call_parser="hermes",
                                  tool_parser_plugin="", reasoning_parser=reasoning,
                                  vocab=vocab)
    named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    return ChatParsing(parsers=parsers, tools=TOOLS, tool_choice="named" if named else choice,
                       named=named, **kwargs)


def final(s, text, finish="stop"):
    return ChoiceParser(s, []).final(text, finish)


def streamed(s, tok, text, finish="stop"):
    p = ChoiceParser(s, [])
    pieces = list(token_deltas(tok, text))
    deltas = [p.delta(piece, ids, i == len(pieces) - 1) for i, (piece, ids) in enumerate(pieces)]
    got = accumulate(deltas)
    got["finish_reason"] = p.stream_finish_reason(finish)
    return got


def test_reasoning_then_a_call(vocab, marker_tok):
    s = setup(vocab)
    m = final(s, "<think>plan</think>Sure " + CALL)
    assert (m.reasoning, m.content, m.finish_reason) == ("plan", "Sure ", "tool_calls")
    assert [(c.name, c.arguments) for c in m.tool_calls] == [("get_weather", '{"city": "Paris"}')]
    got = streamed(s, marker_tok, "<think>plan</think>Sure " + CALL)
    assert (got["reasoning"], got["content"], got["finish_reason"]) == ("plan", "Sure ",
                                                                        "tool_calls")
    assert got["calls"][0]["arguments"] == '{"city": "Paris"}'


def test_no_call_is_plain_content(vocab, marker_tok):
    s = setup(vocab, reasoning="")
    m = final(s, "Hello")
    assert (m.content, m.tool_calls, m.finish_reason) == ("Hello", None, "stop")
    got = streamed(s, marker_tok, "Hello")
    assert got["content"] == "Hello" and not got["calls"] and got["finish_reason"] == "stop"


def test_tool_choice_none_leaves_markup_as_content(vocab, marker_tok):
    s = setup(vocab, choice="none", reasoning="")
    assert final(s, CALL).content == CALL and final(s, CALL).tool_calls is None
    assert streamed(s, marker_tok, CALL)["content"] == CALL


def test_parallel_tool_calls_false_keeps_the_first(vocab, marker_tok):
    s = setup(vocab, reasoning="", parallel_tool_calls=False)
    text = CALL + CALL.replace("get_weather", "get_time")
    assert [c.name for c in final(s, text).tool_calls] == ["get_weather"]
    assert list(streamed(s, marker_tok, text)["calls"]) == [0]


def test_include_reasoning_false_drops_the_thought(vocab, marker_tok):
    s = setup(vocab, include_reasoning=False)
    assert final(s, "plan</think>ok").reasoning is None
    got = streamed(s, marker_tok, "plan</think>ok")
    assert got["reasoning"] == "" and got["content"] == "ok"


def test_named_tool_choice_reads_the_arguments_json(vocab, marker_tok):
    s = setup(vocab, choice={"type": "function", "function": {"name": "get_weather"}},
              reasoning="")
    m = final(s, '{"city": "Oslo"}')
    assert (m.content, m.finish_reason) == ("", "stop")
    assert [(c.name, c.arguments) for c in m.tool_calls] == [("get_weather", '{"city": "Oslo"}')]
    got = streamed(s, marker_tok, '{"city": "Oslo"}')
    assert got["calls"][0]["name"] == "get_weather"
    assert got["calls"][0]["arguments"] == '{"city": "Oslo"}'
    assert got["finish_reason"] == "stop"  # named choices finish with "stop", as in vLLM


def test_required_reads_the_array_of_calls(vocab, marker_tok):
    s = setup(vocab, choice="required", reasoning="")
    text = ('[{"name": "get_weather", "parameters": {"city": "Oslo"}}, '
            '{"name": "get_time", "parameters": {}}]')
    m = final(s, text)
    assert m.finish_reason == "tool_calls" and m.content == ""
    assert [(c.name, c.arguments) for c in m.tool_calls] == [
        ("get_weather", '{"city": "Oslo"}'), ("get_time", "{}")]
    got = streamed(s, marker_tok, text)
    assert [(c["name"], c["arguments"]) for c in got["calls"].values()] == [
        ("get_weather", '{"city": "Oslo"}'), ("get_time", "{}")]
    assert final(s, "not json").tool_calls == []


def test_required_schema_is_vllms(vocab):
    schema = json_schema(TOOLS, None, False)
    assert schema["type"] == "array" and schema["minItems"] == 1 and schema["maxItems"] == 1
    first, second = schema["items"]["anyOf"]
    assert first["properties"]["name"] == {"type": "string", "enum": ["get_weather"]}
    assert second["properties"]["parameters"] == {"type": "object", "properties": {}}
    assert json_schema(TOOLS, "get_weather", None) == TOOLS[0]["function"]["parameters"]


@pytest.mark.parametrize("cut", range(0, 60, 7))
def test_required_scan_is_prefix_stable(cut):
    text = '[{"name": "a", "parameters": {"x": "}]"}}, {"name": "b", "parameters": 3}]'
    whole = scan_required(text)
    for span, match in zip(scan_required(text[:cut]), whole):
        assert span.args_start in (None, match.args_start)
        assert span.name in (None, match.name)
    assert [s.name for s in whole] == ["a", "b"]
    assert json.loads(text[whole[0].args_start:whole[0].args_end]) == {"x": "}]"}


def test_grammar_engine_families_keep_the_parsers_content(vocab, marker_tok):
    parsers = load_output_parsers(enable_auto_tool_choice=True, tool_call_parser="granite",
                                  tool_parser_plugin="", reasoning_parser="", vocab=vocab)
    for choice in ("auto", "none"):
        s = ChatParsing(parsers=parsers, tools=TOOLS, tool_choice=choice)
        assert final(s, "<|tool_call|>not json").content == "not json"
    s = ChatParsing(parsers=parsers, tools=TOOLS, tool_choice="none")
    got = streamed(s, marker_tok, '<|tool_call|>[{"name": "f", "arguments": {}}] ok')
    assert got["calls"] == {} and got["content"] == " ok"
