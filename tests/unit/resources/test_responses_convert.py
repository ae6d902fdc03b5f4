"""/v1/responses conversion and rendering: input items -> chat messages, the echoed response
object, output items and the streamed events, through the real bodies (``tests.support.bodies``)."""
from __future__ import annotations

import json

import pytest

from base.errors import InvalidRequest
from resources.responses.convert import chat_body, prepare_responses
from resources.responses.events import ResponsesStreamRenderer
from resources.responses.items import input_messages
from resources.responses.render import render_responses_response
from tests.support.bodies import BodyRun
from tests.unit.resources.conftest import SAY_HI


def test_items_become_chat_messages():
    items = [{"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
             {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "think"}],
              "summary": []},
             {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
             {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "ok"},
             {"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": "Done."}]}]
    assert input_messages(items) == [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
        {"role": "assistant", "reasoning": "think", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1"},
        {"role": "assistant", "content": "Done."}]


@pytest.mark.parametrize("item", [{"type": "web_search_call"}, {"type": "reasoning",
                                                                "encrypted_content": "x"}, 7])
def test_unsupported_items_are_400(item):
    with pytest.raises(InvalidRequest):
        input_messages([item])


def test_chat_body_maps_fields():
    body = {"input": "hi", "instructions": "Be brief.", "max_output_tokens": 5,
            "reasoning": {"effort": "low"}, "temperature": 0.5, "truncation": "auto",
            "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}}},
            "tools": [{"type": "function", "name": "f", "parameters": {}}],
            "tool_choice": {"type": "function", "name": "f"}}
    chat = chat_body(body, body["tools"], body["tool_choice"], [])
    assert chat["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "hi"}]
    assert chat["max_tokens"] == 5 and chat["reasoning_effort"] == "low"
    assert chat["temperature"] == 0.5 and chat["truncate_prompt_tokens"] == -1
    assert chat["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "n", "schema": {"type": "object"}}}
    assert chat["tools"] == [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}


@pytest.mark.parametrize("body, param", [
    ({"input": "hi", "tool_choice": "required"}, "tool_choice"),
    ({"input": "hi", "prompt": {"id": "p"}}, "prompt"),
    ({"input": "hi", "background": True}, "background"),
    ({"input": "hi", "include": ["message.output_text.logprobs"]}, "include"),
    ({"input": "hi", "text": {"format": {"type": "json_object"}}, "structured_outputs": {}},
     "structured_outputs"),
])
def test_refusals(ctx, body, param):
    with pytest.raises(InvalidRequest) as err:
        prepare_responses(body, ctx)
    assert err.value.param == param


def test_response_object_and_events(ctx):
    prepared = prepare_responses({"input": "Say hi", "max_output_tokens": 4,
                                  "metadata": {"k": "v"}}, ctx)
    assert prepared.request_id.startswith("resp_")
    assert prepared.choices[0].external_req_id == prepared.request_id + "_0"
    body = json.loads(BodyRun(prepared, ctx, ResponsesStreamRenderer, render_responses_response
                              ).tokens(SAY_HI[:4], finish=1).response())
    assert body["status"] == "incomplete" and body["tool_choice"] == "none"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert body["metadata"] == {"k": "v"} and body["max_output_tokens"] == 4
    assert [item["type"] for item in body["output"]] == ["message"]
    assert body["usage"]["output_tokens"] == 4

    prepared = prepare_responses({"input": "Say hi", "stream": True}, ctx)
    raw = BodyRun(prepared, ctx, ResponsesStreamRenderer, render_responses_response
                  ).tokens(SAY_HI, finish=0).response().decode()
    events = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.completed"]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == text
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
