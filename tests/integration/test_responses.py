"""/v1/responses end to end with the official ``openai`` client (``responses.create``, streamed
and not): greenfront serving the marker-token model with ``hermes`` tools and ``qwen3``
reasoning, the simulator scripted by text; a whole tool turn (call, then its output as input)."""
from __future__ import annotations

import openai
import pytest

from engine.sim.script import scripted
from tests.integration.weather_script import ANSWER_TEXT, CALL_TEXT
from text.tokenizer import Tokenizer

TOOLS = [{"type": "function", "name": "get_weather", "description": "Current weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}]


@pytest.fixture(scope="module")
def tok(marker_model_dir):
    return Tokenizer.load(marker_model_dir, backend="hf")


@pytest.fixture(scope="module")
def client(weather_server):
    return openai.OpenAI(base_url=weather_server.url + "/v1", api_key="x", max_retries=0)


def create(client, tok, text, **kwargs):
    kwargs.setdefault("input", "Weather in Paris?")
    return client.responses.create(model="tiny", tools=TOOLS,
                                   extra_body={"vllm_xargs": scripted(tok, text)}, **kwargs)


def test_reasoning_and_call(client, tok):
    r = create(client, tok, CALL_TEXT)
    assert r.status == "completed" and r.id.startswith("resp_")
    kinds = [item.type for item in r.output]
    assert kinds == ["reasoning", "function_call"]
    assert r.output[0].content[0].text == "The user wants the weather."
    call = r.output[1]
    assert (call.name, call.arguments) == ("get_weather", '{"city": "Paris"}')
    assert call.call_id.startswith("chatcmpl-tool-") and call.id.startswith("fc_")
    assert r.usage.output_tokens_details.reasoning_tokens > 0
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.tool_choice == "auto" and r.tools[0].name == "get_weather"


def test_streamed_events_in_vllms_order(client, tok):
    events = list(create(client, tok, CALL_TEXT, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    arguments = "".join(e.delta for e in events
                        if e.type == "response.function_call_arguments.delta")
    assert reasoning == "The user wants the weather."
    assert arguments == '{"city": "Paris"}'
    done = [e.item.type for e in events if e.type == "response.output_item.done"]
    assert done == ["reasoning", "function_call"]
    final = events[-1].response
    assert [item.type for item in final.output] == done
    assert final.usage.output_tokens > 0 and final.status == "completed"


def test_tool_output_turn_and_instructions(client, tok):
    first = create(client, tok, CALL_TEXT)
    call = first.output[1]
    history = [{"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
               {"type": "function_call", "call_id": call.call_id, "name": call.name,
                "arguments": call.arguments},
               {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    second = create(client, tok, ANSWER_TEXT, input=history, instructions="Be brief.")
    assert [item.type for item in second.output] == ["reasoning", "message"]
    assert second.output_text == "It is sunny in Paris."
    assert second.instructions == "Be brief."
    assert second.usage.input_tokens > first.usage.input_tokens


def test_max_output_tokens_is_incomplete(client, tok):
    for stream in (False, True):
        if stream:
            r = [e for e in create(client, tok, "</think>It is sunny in Paris today.",
                                   max_output_tokens=4, stream=True)][-1].response
        else:
            r = create(client, tok, "</think>It is sunny in Paris today.", max_output_tokens=4)
        assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
        assert r.max_output_tokens == 4 and r.usage.output_tokens == 4


def test_bad_inputs_are_400s(client, tok):
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="tiny", input="hi", tool_choice="required")
    assert err.value.body["param"] == "tool_choice"
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="tiny", input=[{"type": "web_search_call", "id": "x"}])
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="tiny", input="hi", background=True)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="nope", input="hi")
