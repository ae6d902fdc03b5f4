"""Tools and thinking through /v1/messages with the official ``anthropic`` client: greenfront
serving the marker-token model with ``hermes`` tools and ``qwen3`` reasoning, the simulator
scripted by text; a two-turn tool conversation, streamed and not, and the tool choices."""
from __future__ import annotations

import anthropic
import pytest

from engine.sim.script import scripted
from tests.integration.weather_script import ANSWER_TEXT, CALL_TEXT
from text.tokenizer import Tokenizer

TOOLS = [{"name": "get_weather", "description": "Current weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}]


@pytest.fixture(scope="module")
def tok(marker_model_dir):
    return Tokenizer.load(marker_model_dir, backend="hf")


@pytest.fixture(scope="module")
def client(weather_server):
    return anthropic.Anthropic(base_url=weather_server.url, api_key="x", max_retries=0)


def ask(client, tok, messages, text, stream, **kwargs):
    args = dict(model="tiny", max_tokens=200, messages=messages, tools=TOOLS,
                extra_body={"vllm_xargs": scripted(tok, text)}, **kwargs)
    if not stream:
        return client.messages.create(**args), None
    with client.messages.stream(**args) as s:
        events = [e.type for e in s if e.type.startswith(("content_block", "message"))]
        return s.get_final_message(), events


@pytest.mark.parametrize("stream", [False, True])
def test_two_turn_tool_conversation(client, tok, stream):
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    out, events = ask(client, tok, messages, CALL_TEXT, stream)
    assert [b.type for b in out.content] == ["thinking", "tool_use"]
    thinking, call = out.content
    assert thinking.thinking == "The user wants the weather." and len(thinking.signature) == 32
    assert call.name == "get_weather" and call.input == {"city": "Paris"}
    assert call.id.startswith("chatcmpl-tool-")
    assert out.stop_reason == "tool_use"
    if stream:  # consecutive deltas counted once (their number follows the tokens)
        events = [e for i, e in enumerate(events) if i == 0 or e != events[i - 1]]
        assert events == ["message_start", "content_block_start", "content_block_delta",
                          "content_block_stop", "content_block_start",
                          "content_block_delta", "content_block_stop", "message_delta",
                          "message_stop"], events
    # The second turn carries the thought, the call and its result back.
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                   for b in out.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                               "content": "sunny, 24 C"}]}]
    out, _ = ask(client, tok, messages, ANSWER_TEXT, stream)
    assert [(b.type, getattr(b, "text", None)) for b in out.content][1:] == [
        ("text", "It is sunny in Paris.")]
    assert out.content[0].thinking == "The tool said sunny."
    assert out.stop_reason == "end_turn"


@pytest.mark.parametrize("stream", [False, True])
def test_named_tool_choice_forces_the_call(client, tok, stream):
    out, _ = ask(client, tok, [{"role": "user", "content": "Weather?"}],
                 '<think>Rome.</think>{"city": "Rome"}', stream,
                 tool_choice={"type": "tool", "name": "get_weather"})
    calls = [b for b in out.content if b.type == "tool_use"]
    assert [(c.name, c.input) for c in calls] == [("get_weather", {"city": "Rome"})]
    assert out.stop_reason == "tool_use"


def test_tool_choice_none_answers_text(client, tok):
    out, _ = ask(client, tok, [{"role": "user", "content": "Hi"}], "<think>x</think>Hello.",
                 False, tool_choice={"type": "none"})
    assert [b.type for b in out.content] == ["thinking", "text"]
    assert out.stop_reason == "end_turn"


def test_stop_sequence_cutting_a_call_is_a_stop_sequence(client, tok):
    out, _ = ask(client, tok, [{"role": "user", "content": "Weather?"}], CALL_TEXT, True,
                 stop_sequences=["Paris"])
    assert out.stop_reason == "stop_sequence" and out.stop_sequence == "Paris"
