"""Tool calling and reasoning end to end: the official ``openai`` client, unchanged, against
greenfront serving the marker-token model with ``hermes`` tools and ``qwen3`` reasoning, the
simulator scripted by text (``engine.sim.script``); and ``bin/greenfront frontend`` started as
``vllm serve`` starts it with those flags."""
from __future__ import annotations

import json

import openai
import pytest

from engine.sim.script import scripted
from tests.integration.harness import deployment
from tests.integration.weather_script import ANSWER_TEXT, CALL_TEXT
from tests.integration.launch_harness import LaunchedFrontend
from text.tokenizer import Tokenizer

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


@pytest.fixture(scope="module")
def tok(marker_model_dir):
    return Tokenizer.load(marker_model_dir, backend="hf")


@pytest.fixture(scope="module")
def tool_server(weather_server):
    return weather_server  # conftest's: shared with the Responses and Messages suites


def client(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)


def ask(c, tok, messages, text, stream):
    """One turn; (content, reasoning, tool calls as (id, name, arguments), finish reason)."""
    kwargs = dict(model="tiny", messages=messages, tools=TOOLS, max_tokens=200,
                  extra_body={"vllm_xargs": scripted(tok, text)})
    if not stream:
        choice = c.chat.completions.create(**kwargs).choices[0]
        calls = [(t.id, t.function.name, t.function.arguments)
                 for t in choice.message.tool_calls or []]
        return (choice.message.content, getattr(choice.message, "reasoning", None), calls,
                choice.finish_reason)
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in c.chat.completions.create(stream=True, **kwargs):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        reasoning += getattr(delta, "reasoning", None) or ""
        for t in delta.tool_calls or []:
            entry = calls.setdefault(t.index, [None, None, ""])
            entry[0] = entry[0] or t.id
            entry[1] = entry[1] or (t.function and t.function.name)
            entry[2] += (t.function and t.function.arguments) or ""
        finish = chunk.choices[0].finish_reason or finish
    return content or None, reasoning or None, [tuple(v) for v in calls.values()], finish


@pytest.mark.parametrize("stream", [False, True])
def test_two_turn_tool_conversation_with_the_openai_client(tool_server, tok, stream):
    c = client(tool_server.url)
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    content, reasoning, calls, finish = ask(c, tok, messages, CALL_TEXT, stream)
    assert finish == "tool_calls" and content is None
    assert reasoning == "The user wants the weather."
    [(call_id, name, arguments)] = calls
    assert call_id.startswith("chatcmpl-tool-") and name == "get_weather"
    assert json.loads(arguments) == {"city": "Paris"}

    messages += [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": call_id, "content": '{"sky": "sunny"}'}]
    content, reasoning, calls, finish = ask(c, tok, messages, ANSWER_TEXT, stream)
    assert (content, reasoning, calls, finish) == (
        "It is sunny in Paris.", "The tool said sunny.", [], "stop")


def test_the_history_renders_through_the_chat_template(tool_server, tok):
    body = {"model": "tiny", "tools": TOOLS, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "cold"}]}
    import requests
    out = requests.post(tool_server.url + "/tokenize", json=body, timeout=30).json()
    text = tok.decode(out["tokens"], skip_special_tokens=False)
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}' in text
    assert "<tool_response>\ncold\n</tool_response>" in text


def test_auto_tool_choice_without_a_parser_is_vllms_400(server):
    with pytest.raises(openai.BadRequestError, match="--enable-auto-tool-choice"):
        client(server.url).chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "x"}], tools=TOOLS)


def test_frontend_launched_as_vllm_serve_serves_tools_and_reasoning(marker_model_dir, tok):
    frontend = LaunchedFrontend(marker_model_dir, args={
        "enable_auto_tool_choice": True, "tool_call_parser": "hermes",
        "reasoning_parser": "qwen3"}, sim_args=["--itl-ms", "1"])
    try:
        frontend.wait_healthy()
        content, reasoning, calls, finish = ask(
            client(frontend.url), tok, [{"role": "user", "content": "Weather?"}], CALL_TEXT,
            stream=True)
        assert (finish, reasoning) == ("tool_calls", "The user wants the weather.")
        assert [(n, json.loads(a)) for _, n, a in calls] == [("get_weather", {"city": "Paris"})]
    finally:
        frontend.stop()


@pytest.fixture(scope="module")
def mistral_server(marker_model_dir):
    env = {"GREENFRONT_ENABLE_AUTO_TOOL_CHOICE": "1", "GREENFRONT_TOOL_CALL_PARSER": "mistral",
           "GREENFRONT_REASONING_PARSER": "mistral"}
    with deployment(marker_model_dir, env=env, sim_args="--itl-ms 1 --ttft-ms 2") as srv:
        yield srv


@pytest.mark.parametrize("stream", [False, True])
def test_a_parser_that_keeps_special_tokens_reads_the_thought(mistral_server, tok, stream):
    # mistral's reasoning markers are special tokens: the request is changed to keep them in
    # the text (a typed-struct regression once made this a 500).
    c = client(mistral_server.url)
    got = ask(c, tok, [{"role": "user", "content": "hi"}],
              "[THINK]Let me think.[/THINK]The answer.", stream)
    assert got == ("The answer.", "Let me think.", [], "stop")
