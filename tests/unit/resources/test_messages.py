"""Anthropic Messages: the request checks, the conversion to chat, the non-streamed body and the
stream's events, through the real bodies (docs/messages.md)."""
from __future__ import annotations

import dataclasses
import json

import pytest

from base.errors import ApiError
from resources.messages import types
from resources.messages.convert import chat_body
from resources.messages.events import BlockEvents, MessagesStreamRenderer
from resources.messages.prepare import count_tokens, needs_system_first, prepare_messages
from resources.messages.render import anthropic_usage, render_messages_response, stop_reason
from tests.support.bodies import BodyRun
from text.output_parsers import load_output_parsers

HI = [{"role": "user", "content": "Hi"}]


def parsed(**body):
    return types.parse_request({"model": "tiny", "messages": HI, "max_tokens": 10, **body},
                               types.fields(4), types.MessagesRequest)


def converted(**body):
    return chat_body(parsed(**body), merge_inline=False, disabled_effort="none")


def raised(call, *args) -> ApiError:
    with pytest.raises(ApiError) as err:
        call(*args)
    return err.value


def test_field_errors_are_openai_shaped_validation_errors(ctx):
    err = raised(prepare_messages, {"model": "tiny", "messages": HI, "max_tokens": 0}, ctx)
    assert err.status == 400 and err.type == "Bad Request"
    assert err.to_envelope()["error"]["message"].startswith("1 validation error:")
    assert "max_tokens must be positive" in err.message
    err = raised(prepare_messages, {"model": "tiny", "messages": [{"role": "tool",
                                                                   "content": 1}]}, ctx)
    text = err.message
    assert text.startswith("4 validation errors:")
    assert "'loc': 'body.messages.0.role'" in text and "'user', 'assistant' or 'system'" in text
    assert "'loc': 'body.messages.0.content'" in text and "body.max_tokens" in text
    err = raised(prepare_messages, {"model": "tiny", "messages": HI, "max_tokens": 2000,
                                    "thinking": {"type": "enabled", "budget_tokens": 2000}}, ctx)
    assert "thinking.budget_tokens must be less than max_tokens" in err.message
    err = raised(prepare_messages, {"model": "tiny", "messages": HI, "max_tokens": 5,
                                    "thinking": {"type": "sometimes"}}, ctx)
    assert "union_tag_invalid" in err.message


def test_handler_errors_are_left_to_the_resource(ctx):
    err = raised(prepare_messages, {"model": "nope", "messages": HI, "max_tokens": 5}, ctx)
    assert err.status == 404 and err.envelope is None
    err.envelope = "anthropic"
    assert err.to_envelope() == {"type": "error", "error": {
        "type": "NotFoundError", "message": err.message}}


def test_conversion_of_history_tools_and_choices():
    body = converted(system=[{"type": "text", "text": "x-anthropic-billing-header: 1"},
                             {"type": "text", "text": "Be brief."}],
                     messages=[
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Need a tool.", "signature": "s"},
            {"type": "tool_use", "id": "t1", "name": "w", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "sunny"}]}]}],
                     tools=[{"name": "w", "input_schema": {"properties": {}}}],
                     tool_choice={"type": "any", "disable_parallel_tool_use": True},
                     stop_sequences=["END"], stream=True)
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "reasoning": "Need a tool.", "tool_calls": [
            {"id": "t1", "type": "function",
             "function": {"name": "w", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "sunny"}]
    assert body["tools"][0]["function"]["parameters"] == {"properties": {}, "type": "object"}
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    assert body["stop"] == ["END"] and body["max_completion_tokens"] == 10
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert converted(tools=[{"name": "w", "input_schema": {}}])["tool_choice"] == "auto"
    named = converted(tools=[{"name": "w", "input_schema": {}}],
                      tool_choice={"type": "tool", "name": "w"})["tool_choice"]
    assert named == {"type": "function", "function": {"name": "w"}}
    assert converted(thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=2000)[
        "thinking_token_budget"] == 1024


def test_inline_system_messages_merge_only_for_templates_that_need_it(ctx):
    f = parsed(messages=[{"role": "user", "content": "a"}, {"role": "system", "content": "S"},
                         {"role": "user", "content": "b"}])
    kept = chat_body(f, merge_inline=False, disabled_effort="none")["messages"]
    assert [m["role"] for m in kept] == ["user", "system", "user"]
    merged = chat_body(f, merge_inline=True, disabled_effort="none")["messages"]
    assert merged[0] == {"role": "system", "content": "S"} and len(merged) == 3
    assert needs_system_first(None)
    assert needs_system_first("{{ raise_exception('system first') }}")
    assert not needs_system_first("{% for m in messages %}{{ m.content }}{% endfor %}")


def test_count_tokens_is_the_chat_prompt_length(ctx):
    out = json.loads(count_tokens({"model": "tiny", "messages": HI}, ctx))
    assert out == {"input_tokens": 4, "context_management": {"original_input_tokens": 4}}


def test_stop_reasons_and_usage():
    assert stop_reason("length", None, True, True) == ("max_tokens", None)
    assert stop_reason("stop", "END", False, False) == ("stop_sequence", "END")
    assert stop_reason("stop", "END", True, True) == ("tool_use", None)
    assert stop_reason("stop", "END", True, False) == ("stop_sequence", "END")
    assert stop_reason("tool_calls", None, True, True) == ("tool_use", None)
    assert stop_reason("stop", 2, False, False) == ("end_turn", None)
    assert stop_reason("abort", None, False, False) == (None, None)
    assert anthropic_usage({"prompt_tokens": 10, "completion_tokens": 3,
                            "prompt_tokens_details": {"cached_tokens": 4,
                                                      "created_cache_tokens": 2}}) == {
        "input_tokens": 4, "output_tokens": 3, "cache_creation_input_tokens": 2,
        "cache_read_input_tokens": 4}


def run(ctx, tokens, **body):
    prepared = prepare_messages({"model": "tiny", "messages": HI, "max_tokens": 10, **body}, ctx)
    # The engine's last token is the EOS that stopped it (counted, not shown).
    return BodyRun(prepared, ctx, MessagesStreamRenderer, render_messages_response).tokens(
        [*tokens, 2], 0, None).response()


def test_non_streamed_body(ctx):
    ids = ctx.tokenizer.encode("Hello", False)
    body = json.loads(run(ctx, ids))
    assert body["id"].startswith("chatcmpl-")
    assert {k: v for k, v in body.items() if k != "id"} == {
        "type": "message", "role": "assistant", "content": [{"type": "text", "text": "Hello"}],
        "model": "tiny", "stop_reason": "end_turn",
        "usage": {"input_tokens": 4, "output_tokens": len(ids) + 1}}


def test_streamed_events(ctx):
    ids = ctx.tokenizer.encode("Hello", False)
    raw = run(ctx, ids, stream=True).decode()
    events = [block.split("\n", 1) for block in raw.strip().split("\n\n")]
    kinds = [kind.removeprefix("event: ") for kind, _ in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    data = [json.loads(d.removeprefix("data: ")) for _, d in events]
    assert data[1] == {"type": "content_block_start", "content_block": {"type": "text",
                                                                        "text": ""}, "index": 0}
    text = "".join(d["delta"]["text"] for d in data if d["type"] == "content_block_delta")
    assert text == "Hello"
    assert data[-2] == {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                           "stop_sequence": None},
                        "usage": {"input_tokens": 4, "output_tokens": len(ids) + 1}}


def test_block_events_hold_text_during_a_call_and_sign_thoughts():
    blocks = BlockEvents()
    out = blocks.reasoning("hmm") + blocks.tool_call("c1", 0, "f", '{"a"') + blocks.content(
        "\n") + blocks.tool_call(None, 0, None, ": 1}") + blocks.flush()
    events = [json.loads(line.removeprefix("data: ")) for line in out.decode().split("\n")
              if line.startswith("data: ")]
    shape = [(e["type"], e.get("index"), (e.get("delta") or e.get("content_block") or {}).get(
        "type")) for e in events]
    assert shape == [
        ("content_block_start", 0, "thinking"), ("content_block_delta", 0, "thinking_delta"),
        ("content_block_delta", 0, "signature_delta"), ("content_block_stop", 0, None),
        ("content_block_start", 1, "tool_use"), ("content_block_delta", 1, "input_json_delta"),
        ("content_block_delta", 1, "input_json_delta"), ("content_block_stop", 1, None),
        ("content_block_start", 2, "text"), ("content_block_delta", 2, "text_delta"),
        ("content_block_stop", 2, None)]
    assert blocks.tool_complete()


def test_a_call_cut_by_a_stop_sequence_is_not_a_finished_tool_use(ctx):
    # vLLM answers 400 here (its json.loads of the cut arguments raises); greenfront answers as
    # its stream does.
    parsers = load_output_parsers(enable_auto_tool_choice=True, tool_call_parser="pythonic",
                                  tool_parser_plugin="", reasoning_parser="", vocab={})
    c = dataclasses.replace(ctx, output_parsers=parsers)
    text = '{"city": "Oslo"}'
    prepared = prepare_messages({
        "model": "tiny", "messages": HI, "max_tokens": 10, "stop_sequences": ["Oslo"],
        "tools": [{"name": "w", "input_schema": {"properties": {"city": {"type": "string"}}}}],
        "tool_choice": {"type": "tool", "name": "w"}}, c)
    body = json.loads(BodyRun(prepared, c, MessagesStreamRenderer, render_messages_response)
                      .tokens(c.tokenizer.encode(text, False), None, None).response())
    assert [(b["type"], b["input"]) for b in body["content"]] == [("tool_use", {})]
    assert body["stop_reason"] == "stop_sequence" and body["stop_sequence"] == "Oslo"


def test_disabled_thinking_effort_is_probed_or_configured(ctx):
    from resources.messages.prepare import _chat_body_of
    f = parsed(thinking={"type": "disabled"})
    # The test model's template ignores reasoning_effort: "none" renders as a real effort does,
    # so the probe picks "low" (as vLLM's does).
    assert _chat_body_of(f, ctx, "auto")["reasoning_effort"] == "low"
    assert _chat_body_of(f, ctx, "none")["reasoning_effort"] == "none"
    assert "reasoning_effort" not in _chat_body_of(parsed(), ctx, "none")
