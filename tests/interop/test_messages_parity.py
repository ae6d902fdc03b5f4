"""Anthropic Messages parity with vLLM 0.32's own Python frontend (docs/messages.md).

For each parser configuration (none, a tool parser, a reasoning parser with a tool parser),
vLLM's frontend and greenfront, each on a greenfront simulator with the marker-token model, get
the same /v1/messages requests with scripted model outputs. Non-streamed bodies must be equal
(ids and signatures only checked for shape); streams must carry the same events in the same
order (consecutive deltas of one block joined, since how many tokens one event carries is
timing); count_tokens answers must be equal; bad inputs must get the same status and body.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
import requests

from engine.sim.script import scripted
from tests.interop.parity import ParityPair
from tests.interop.peers import requires_peers
from text.tokenizer import Tokenizer

pytestmark = requires_peers

TOOLS = [
    {"name": "get_weather", "description": "Current weather in a city",
     "input_schema": {"type": "object", "properties": {
         "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
         "required": ["city"]}},
    {"name": "get_time", "description": "Local time",
     "input_schema": {"properties": {"zone": {"type": "string"}}}},
]
W = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}'
T = '{"name": "get_time", "arguments": {"zone": "CET"}}'
HISTORY = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Use the tool.", "signature": "abc"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
         "input": {"city": "Paris"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1",
         "content": [{"type": "text", "text": "sunny"}, {"type": "text", "text": "24 C"}]},
        {"type": "text", "text": "And now?"}]},
]

#: vLLM 0.32 constrains hermes' "any" and named choices with an xgrammar structural tag (the
#: model writes <tool_call> markup); greenfront's chat constrains them to the calls' JSON
#: schema (docs/api.md §5.2: no structural tags), so the same markup is read differently.
STRUCTURAL_TAGS = ("both", "chat: no xgrammar structural tags for hermes' required/named "
                           "choices")

#: vLLM answers 400 when a stop sequence cuts a call's arguments (json.loads of them raises in
#: its converter); greenfront answers the cut call as its stream does (docs/messages.md §6).
CUT_CALL = ("whole", "vLLM: 400 for a call a stop sequence cut; greenfront: the call, "
                     "stop_sequence")
#: A chat bug, not Messages': with a stop string, chat's stream splits the <think> markup (the
#: streamed reasoning starts "<thi", "k>Pl"...); /v1/chat/completions streams the same.
THINK_SPLIT = ("stream", "chat: a stop string splits the <think> markup in streamed reasoning")

#: config -> (vLLM flags, [(case id, scripted output, request fields[, (mode, xfail reason)])])
CONFIGS: dict[str, tuple[list[str], list[tuple[str, str, dict]]]] = {
    "plain": ([], [
        ("text", "Hello there.", {}),
        ("max-tokens", "one two three four five", {"max_tokens": 3}),
        ("stop-sequence", "one two three four five", {"stop_sequences": [" three"]}),
        ("system-and-history", "Fine.", {"system": [{"type": "text", "text": "Be brief."}],
                                         "messages": [
            {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
            {"role": "system", "content": "Inline rule."},
            {"role": "user", "content": [{"type": "text", "text": "How are you?"}]}]}),
        ("sampling-fields", "ok", {"temperature": 0.5, "top_p": 0.9, "top_k": 5,
                                   "metadata": {"user_id": "u"}}),
        ("thinking-disabled", "ok", {"thinking": {"type": "disabled"}}),
    ]),
    "hermes": (["--enable-auto-tool-choice", "--tool-call-parser", "hermes"], [
        ("one-call", f"<tool_call>\n{W}\n</tool_call>", {}),
        ("content-then-call", f"Let me look.\n<tool_call>\n{W}\n</tool_call>", {}),
        ("parallel", f"<tool_call>\n{W}\n</tool_call>\n<tool_call>\n{T}\n</tool_call>", {}),
        ("no-call", "It is sunny.", {}),
        ("truncated-call", f"<tool_call>\n{W}\n</tool_call>", {"max_tokens": 14}),
        ("stop-inside-call", f"<tool_call>\n{W}\n</tool_call>", {"stop_sequences": ["Paris"]}),
        ("any", f"<tool_call>\n{T}\n</tool_call>", {"tool_choice": {"type": "any"}},
         STRUCTURAL_TAGS),
        ("named", f"<tool_call>\n{W}\n</tool_call>",
         {"tool_choice": {"type": "tool", "name": "get_weather"}}, STRUCTURAL_TAGS),
        ("choice-none", f"<tool_call>{W}</tool_call>", {"tool_choice": {"type": "none"}}),
        ("no-parallel", f"<tool_call>{W}</tool_call><tool_call>{T}</tool_call>",
         {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}),
        ("history", "It is sunny.", {"messages": HISTORY}),
    ]),
    # pythonic has no structural-tag format in vLLM either: "any" and named choices are the
    # calls' JSON schema on both sides.
    "pythonic": (["--enable-auto-tool-choice", "--tool-call-parser", "pythonic"], [
        ("one-call", "[get_weather(city='Paris', unit='c')]", {}),
        ("any", '[{"name": "get_time", "parameters": {"zone": "UTC"}}]',
         {"tool_choice": {"type": "any"}}),
        ("any-truncated", '[{"name": "get_weather", "parameters": {"city": "Oslo"}}]',
         {"tool_choice": {"type": "any"}, "max_tokens": 9}),
        ("named", '{"city": "Oslo"}', {"tool_choice": {"type": "tool", "name": "get_weather"}}),
        ("named-stop-inside", '{"city": "Oslo"}', {"tool_choice": {
            "type": "tool", "name": "get_weather"}, "stop_sequences": ["Oslo"]}, CUT_CALL),
    ]),
    "hermes+qwen3": (["--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                      "--reasoning-parser", "qwen3"], [
        ("reasoning-then-text", "<think>Simple.</think>It is sunny.", {}),
        ("reasoning-then-call", f"<think>The user wants weather.</think><tool_call>\n{W}"
                                "\n</tool_call>", {}),
        ("whitespace-between", f"<think>Need it.</think>\n\n<tool_call>\n{W}\n</tool_call>",
         {}),
        ("unfinished-thought", "<think>Still thinking about it", {"max_tokens": 8}),
        ("stop-in-thought", "<think>Plan: look it up.</think>It is sunny.",
         {"stop_sequences": ["up."]}, THINK_SPLIT),
        ("stop-after-thought", "<think>Plan.</think>It is sunny. Bye.",
         {"stop_sequences": [" Bye"]}, THINK_SPLIT),
        ("history", "<think>Done.</think>It is sunny.", {"messages": HISTORY}),
        ("budget", "<think>Short.</think>ok", {"thinking": {"type": "enabled",
                                                           "budget_tokens": 1024},
                                               "max_tokens": 2000}),
    ]),
}

#: Bad inputs on the plain configuration: (case id, route, body)
BAD = [
    ("max-tokens-zero", "/v1/messages", {"max_tokens": 0}),
    ("max-tokens-missing", "/v1/messages", {"max_tokens": None}),
    ("bad-role-and-content", "/v1/messages", {"messages": [{"role": "tool", "content": 1}]}),
    ("bad-block-type", "/v1/messages", {"messages": [{"role": "user", "content": [
        {"type": "video"}]}]}),
    ("budget-too-big", "/v1/messages", {"thinking": {"type": "enabled", "budget_tokens": 4096}}),
    ("budget-too-small", "/v1/messages", {"thinking": {"type": "enabled",
                                                       "budget_tokens": 10}}),
    ("thinking-tag", "/v1/messages", {"thinking": {"type": "sometimes"}}),
    ("tool-without-name", "/v1/messages", {"tool_choice": {"type": "tool"}, "tools": TOOLS}),
    ("empty-model", "/v1/messages", {"model": ""}),
    ("unknown-model", "/v1/messages", {"model": "nope"}),
    ("tools-without-parser", "/v1/messages", {"tools": TOOLS}),
    ("not-an-object", "/v1/messages", []),
    ("count-missing-messages", "/v1/messages/count_tokens", {"messages": None}),
    ("count-unknown-model", "/v1/messages/count_tokens", {"model": "nope"}),
]


@pytest.fixture(scope="module")
def tok(marker_model_dir):
    return Tokenizer.load(marker_model_dir, backend="hf")


@pytest.fixture(scope="module", params=list(CONFIGS))
def pair(request, marker_model_dir, tmp_path_factory):
    logs = str(tmp_path_factory.mktemp("messages-" + request.param.replace("+", "-")))
    started = ParityPair(marker_model_dir, CONFIGS[request.param][0], logs).start()
    yield request.param, started
    started.stop()


def _shapes(value: Any) -> Any:
    """Ids and signatures replaced by their shape (random on both sides)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in ("id", "signature") and isinstance(v, str):
                v = re.sub(r"[0-9a-f]{8,}", "<hex>", v)
            out[k] = _shapes(v)
        return out
    if isinstance(value, list):
        return [_shapes(v) for v in value]
    return value


def answer(url: str, body: dict) -> Any:
    """The status and body (non-streamed), or the events with their deltas joined."""
    if not body.get("stream"):
        r = requests.post(url + "/v1/messages", json=body, timeout=120)
        return r.status_code, _shapes(r.json())
    events: list[list] = []
    with requests.post(url + "/v1/messages", json=body, timeout=120, stream=True) as r:
        assert r.status_code == 200, r.text
        kind = None
        for line in r.iter_lines(decode_unicode=True):
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = _shapes(json.loads(line[6:]))
                assert data["type"] == kind
                last = events[-1][1] if events else None
                if (kind == "content_block_delta" and last and last["type"] == kind
                        and last["index"] == data["index"]
                        and last["delta"]["type"] == data["delta"]["type"]
                        and data["delta"]["type"] != "signature_delta"):
                    for key, value in data["delta"].items():
                        if key != "type":
                            last["delta"][key] += value
                    continue
                events.append([kind, data])
    return events


def _cases() -> list:
    out = []
    for config, (_, cases) in CONFIGS.items():
        for case, text, fields, *known in cases:
            for mode in ("whole", "stream"):
                marks = [pytest.mark.xfail(strict=True, reason=known[0][1])
                         for _ in known if known[0][0] in (mode, "both")]
                out.append(pytest.param(config, case, text, fields, mode == "stream",
                                        id=f"{config}-{case}-{mode}", marks=marks))
    return out


@pytest.mark.parametrize("config,case,text,fields,stream", _cases())
def test_same_answer(pair, tok, config, case, text, fields, stream):
    name, both = pair
    if name != config:
        pytest.skip("another configuration's case")
    body = {"model": "tiny", "max_tokens": 200, "temperature": 0,
            "messages": [{"role": "user", "content": "Weather?"}], **fields,
            "vllm_xargs": scripted(tok, text), "stream": stream}
    if name != "plain":
        body.setdefault("tools", TOOLS)
    assert answer(both.greenfront.url, body) == answer(both.vllm.url, body)


def test_count_tokens(pair):
    name, both = pair
    body = {"model": "tiny", "system": "Be brief.", "messages": HISTORY}
    if name != "plain":
        body["tools"] = TOOLS
    got = requests.post(both.greenfront.url + "/v1/messages/count_tokens", json=body, timeout=60)
    want = requests.post(both.vllm.url + "/v1/messages/count_tokens", json=body, timeout=60)
    assert (got.status_code, got.json()) == (want.status_code, want.json())


@pytest.mark.parametrize("case,route,fields", BAD, ids=[b[0] for b in BAD])
def test_bad_inputs(pair, case, route, fields):
    name, both = pair
    if name != "plain":
        pytest.skip("bad inputs run on the plain configuration")
    body: Any = fields
    if isinstance(fields, dict):
        body = {"model": "tiny", "max_tokens": 100, "messages": [{"role": "user",
                                                                  "content": "Hi"}]}
        if route.endswith("count_tokens"):
            body.pop("max_tokens")
        body.update(fields)
        body = {k: v for k, v in body.items() if v is not None}
    got = requests.post(both.greenfront.url + route, json=body, timeout=60)
    want = requests.post(both.vllm.url + route, json=body, timeout=60)
    assert (got.status_code, got.json()) == (want.status_code, want.json())
