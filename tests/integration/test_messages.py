"""The official ``anthropic`` client against a real gunicorn + simulator deployment: /v1/messages
(streamed and not), count_tokens, stop reasons, usage, errors and ``x-api-key``."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import anthropic
import pytest

from engine.sim.script import scripted
from tests.integration.harness import GreenfrontServer
from text.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tok(model_dir):
    return Tokenizer.load(model_dir, backend="hf")


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def ask(client, tok, text, stream=False, **kwargs):
    args = dict(model="tiny", max_tokens=kwargs.pop("max_tokens", 50),
                messages=kwargs.pop("messages", [{"role": "user", "content": "Hi"}]),
                extra_body={"vllm_xargs": scripted(tok, text)}, **kwargs)
    if not stream:
        return client.messages.create(**args)
    with client.messages.stream(**args) as s:
        events = list(s)
        return s.get_final_message(), events


def test_text_answer_ends_its_turn(client, tok):
    out = ask(client, tok, "Hello there.")
    assert out.type == "message" and out.role == "assistant" and out.model == "tiny"
    assert out.id.startswith("chatcmpl-")
    assert [(b.type, b.text) for b in out.content] == [("text", "Hello there.")]
    assert out.stop_reason == "end_turn" and out.stop_sequence is None
    # "[INST]Hi[/INST]" after BOS: 4 prompt tokens.
    assert out.usage.input_tokens == 4
    assert out.usage.output_tokens == len(tok.encode("Hello there.", False)) + 1


def test_max_tokens_and_stop_sequence(client, tok):
    out = ask(client, tok, "one two three four five six", max_tokens=2)
    assert out.stop_reason == "max_tokens" and out.usage.output_tokens == 2
    out = ask(client, tok, "one two three four five six", stop_sequences=[" three"])
    assert out.content[0].text == "one two"
    assert out.stop_reason == "stop_sequence" and out.stop_sequence == " three"


def test_stream_events_build_the_same_message(client, tok):
    final, events = ask(client, tok, "Hello there.", stream=True)
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert kinds[1] == "content_block_start" and kinds[-2] == "message_delta"
    assert kinds[-3] == "content_block_stop"
    assert [(b.type, b.text) for b in final.content] == [("text", "Hello there.")]
    assert final.stop_reason == "end_turn"
    assert events[0].message.usage.input_tokens == 4
    assert final.usage.output_tokens == len(tok.encode("Hello there.", False)) + 1


def test_stream_stop_sequence(client, tok):
    final, _ = ask(client, tok, "one two three four", stream=True, stop_sequences=[" three"])
    assert final.content[0].text == "one two"
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == " three"


def test_empty_answer_is_one_empty_text_block(client, tok):
    out = client.messages.create(model="tiny", max_tokens=5, messages=[
        {"role": "user", "content": "Hi"}], extra_body={"vllm_xargs": {
            "sim_tokens": [tok.eos_token_id]}})
    assert [(b.type, b.text) for b in out.content] == [("text", "")]


def test_system_and_history_reach_the_prompt(client):
    plain = client.messages.count_tokens(model="tiny", messages=[
        {"role": "user", "content": "Hi"}])
    assert plain.input_tokens == 4
    assert plain.model_extra["context_management"] == {"original_input_tokens": 4}
    longer = client.messages.count_tokens(model="tiny", system="Be brief.", messages=[
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Again"}])
    assert longer.input_tokens > plain.input_tokens


def test_bad_inputs(server, client):
    # Request validation: OpenAI's envelope, as vLLM's (400).
    with pytest.raises(anthropic.BadRequestError) as err:
        client.messages.create(model="tiny", max_tokens=0,
                               messages=[{"role": "user", "content": "Hi"}])
    body = err.value.response.json()
    assert body["error"]["type"] == "Bad Request"
    assert "max_tokens must be positive" in body["error"]["message"]
    # The handler's errors: Anthropic's envelope.
    with pytest.raises(anthropic.NotFoundError) as err:
        client.messages.create(model="nope", max_tokens=5,
                               messages=[{"role": "user", "content": "Hi"}])
    body = err.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "NotFoundError"
    assert set(body["error"]) == {"type", "message"}
    # Tools without a tool parser: chat's refusal, in Anthropic's envelope.
    with pytest.raises(anthropic.BadRequestError) as err:
        client.messages.create(model="tiny", max_tokens=5, tools=[
            {"name": "f", "input_schema": {"type": "object"}}],
            messages=[{"role": "user", "content": "Hi"}])
    assert err.value.response.json()["error"]["type"] == "BadRequestError"
    status, body = post(server.url + "/v1/messages/count_tokens", {"messages": []})
    assert status == 400 and body["error"]["type"] == "Bad Request"


def test_x_api_key_is_accepted(model_dir, tok):
    with GreenfrontServer(model_dir, env={"GREENFRONT_API_KEY": "sekret"},
                          sim_args="--itl-ms 1 --ttft-ms 1") as srv:
        good = anthropic.Anthropic(base_url=srv.url, api_key="sekret", max_retries=0)
        assert ask(good, tok, "ok").content[0].text == "ok"
        bad = anthropic.Anthropic(base_url=srv.url, api_key="wrong", max_retries=0)
        with pytest.raises(anthropic.AuthenticationError):
            ask(bad, tok, "ok")


def test_engine_failure_is_anthropic_shaped(server):
    body = {"model": "tiny", "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}],
            "vllm_xargs": {"sim_error_after": 2}}
    status, answer = post(server.url + "/v1/messages", body)
    assert status == 500
    assert answer == {"type": "error", "error": {"type": "InternalServerError",
                                                 "message": "Internal server error"}}
    req = urllib.request.Request(server.url + "/v1/messages",
                                 data=json.dumps({**body, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        events = resp.read().decode().strip().split("\n\n")
    assert events[0].startswith("event: message_start\n")
    assert events[-1] == ('event: error\ndata: {"type":"error","error":{"type":"internal_error",'
                          '"message":"Internal server error"}}')
