"""/v1/responses parity with vLLM 0.32's own Python frontend, through the official ``openai``
client: both frontends (same flags, the marker-token model, each on a greenfront simulator)
answer the same scripted model outputs with no tool parser, a tool parser, and a reasoning
parser with a tool parser. Whole response objects must be equal (ids and times aside, but which
id is which is checked), streams event by event (runs of deltas joined: how tokens group into
deltas is timing), stored responses as ``retrieve`` returns them, a ``previous_response_id``
turn's prompt, and bad inputs' status and error."""
from __future__ import annotations

import re
from typing import Any

import openai
import pytest

from engine.sim.script import scripted
from tests.interop.parity import TOOLS, ParityPair
from tests.interop.peers import requires_peers
from text.tokenizer import Tokenizer

pytestmark = requires_peers

FUNCTIONS = [{"type": "function", **t["function"]} for t in TOOLS]
W = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}'
T = '{"name": "get_time", "arguments": {"zone": "CET"}}'
HERMES = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
HISTORY = [{"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
           {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "Which city?"}]},
           {"role": "user", "content": "Paris."}]
SCHEMA = {"type": "json_schema", "name": "w", "schema": {
    "type": "object", "properties": {"t": {"type": "integer"}}}}

#: config -> (flags, [(case, scripted output, request fields)])
CONFIGS: dict[str, tuple[list[str], list[tuple[str, str, dict]]]] = {
    "plain": ([], [
        ("hello", "Hello there.", {}),
        ("truncated", "It is sunny today in Paris.", {"max_output_tokens": 4}),
        ("instructions", "Sure.", {"instructions": "Be brief.", "metadata": {"k": "v"}}),
        ("items", "Sunny.", {"input": HISTORY, "temperature": 0.3, "top_p": 0.9}),
        ("json-schema", '{"t": 21}', {"text": {"format": SCHEMA}}),
        ("empty", "", {}),
    ]),
    "hermes": (HERMES, [
        ("one-call", f"<tool_call>\n{W}\n</tool_call>", {"tools": FUNCTIONS}),
        ("parallel", f"<tool_call>{W}</tool_call>\n<tool_call>{T}</tool_call>",
         {"tools": FUNCTIONS}),
        ("content-then-call", f"Let me look.\n<tool_call>{W}</tool_call>", {"tools": FUNCTIONS}),
        ("no-call", "It is sunny.", {"tools": FUNCTIONS}),
        ("tool-choice-none", f"<tool_call>{W}</tool_call>",
         {"tools": FUNCTIONS, "tool_choice": "none"}),
        ("parallel-off", f"<tool_call>{W}</tool_call><tool_call>{T}</tool_call>",
         {"tools": FUNCTIONS, "parallel_tool_calls": False}),
        ("tool-output-turn", "It is sunny in Paris.", {"tools": FUNCTIONS, "input": [
            {"role": "user", "content": "Weather?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather",
             "arguments": '{"city": "Paris"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]}),
    ]),
    "hermes+qwen3": ([*HERMES, "--reasoning-parser", "qwen3"], [
        ("reasoning-then-call", f"<think>The user wants weather.</think>\n\n<tool_call>\n{W}"
                                "\n</tool_call>", {"tools": FUNCTIONS}),
        ("reasoning-then-text", "<think>hmm</think>It is sunny.", {"tools": FUNCTIONS}),
        ("truncated-thought", "<think>Still thinking about it all", {"max_output_tokens": 5}),
        ("no-reasoning-shown", f"<think>secret</think><tool_call>{W}</tool_call>",
         {"tools": FUNCTIONS, "include_reasoning": False}),
        ("effort", "<think>quick</think>Yes.", {"reasoning": {"effort": "low"}}),
    ]),
}
STORE = {"VLLM_ENABLE_RESPONSES_API_STORE": "1"}
_ID = re.compile(r"^(resp|msg|rs|fc)_[0-9a-f]{16}$|^chatcmpl-tool-[0-9a-f]{16}$")


@pytest.fixture(scope="module")
def tok(marker_model_dir):
    return Tokenizer.load(marker_model_dir, backend="hf")


@pytest.fixture(scope="module", params=list(CONFIGS))
def pair(request, marker_model_dir, tmp_path_factory):
    logs = tmp_path_factory.mktemp(f"responses-{request.param}")
    p = ParityPair(marker_model_dir, CONFIGS[request.param][0], str(logs), itl_ms=5,
                   vllm_env=STORE, greenfront_env={**STORE, "GREENFRONT_MAX_MODEL_LEN": "2048"}
                   ).start()
    p.config = request.param
    p.clients = [openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
                 for url in (p.vllm.url, p.greenfront.url)]
    yield p
    p.stop()


def normalized(value: Any, ids: dict[str, str] | None = None) -> Any:
    """``value`` with each generated id replaced by its kind and order of appearance, and times
    zeroed."""
    ids = {} if ids is None else ids
    if isinstance(value, dict):
        return {k: 0 if k == "created_at" else normalized(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v, ids) for v in value]
    if isinstance(value, str) and _ID.match(value):
        kind = value.rsplit("_" if "_" in value else "-", 1)[0]
        return ids.setdefault(value, f"{kind}#{len(ids)}")
    return value


#: vLLM's own request fields, which the client sends in ``extra_body``
EXTRA = ("include_reasoning", "structured_outputs", "vllm_xargs")


def with_extras(request: dict) -> dict:
    extra = {k: request.pop(k) for k in EXTRA if k in request}
    return {**request, "extra_body": extra} if extra else request


def body(tok: Tokenizer, text: str, fields: dict) -> dict:
    return with_extras({"model": "tiny", "input": "Weather in Paris?", "temperature": 0,
                        "vllm_xargs": scripted(tok, text), **fields})


def whole(c: openai.OpenAI, request: dict) -> dict:
    return c.responses.with_raw_response.create(**request).http_response.json()


def events(c: openai.OpenAI, request: dict) -> list[dict]:
    """The stream's events, runs of deltas of one item joined, sequence numbers checked."""
    out: list[dict] = []
    with c.responses.create(stream=True, **request) as stream:
        raw = [e.model_dump(mode="json", exclude_unset=True) for e in stream]
    assert [e.pop("sequence_number") for e in raw] == list(range(len(raw)))
    for e in raw:
        last = out[-1] if out else None
        if (e["type"].endswith(".delta") and last is not None and last["type"] == e["type"]
                and last.get("item_id") == e.get("item_id")):
            last["delta"] += e["delta"]
        else:
            out.append(e)
    return out


def _run(pair, tok, case, fn):
    flags, cases = CONFIGS[pair.config]
    text, fields = next((t, f) for name, t, f in cases if name == case)
    return [normalized(fn(c, body(tok, text, fields))) for c in pair.clients]


def test_outputs_equal(pair, tok):
    """Every case of the pair's configuration, whole and streamed."""
    differ = []
    for case, _, _ in CONFIGS[pair.config][1]:
        vllm, ours = _run(pair, tok, case, whole)
        if ours != vllm:
            differ.append((case, "whole", vllm, ours))
        vllm, ours = _run(pair, tok, case, events)
        if ours != vllm:
            differ.append((case, "stream", vllm, ours))
    assert not differ, "\n\n".join(f"{case} ({how}):\n vLLM: {v}\n ours: {o}"
                                     for case, how, v, o in differ)


def test_retrieve_and_previous_response(pair, tok):
    if pair.config != "plain":
        pytest.skip("once, with the plain pair")
    first, chained = [], []
    for c in pair.clients:
        r = whole(c, body(tok, "Sunny.", {"instructions": "Be brief."}))
        assert c.responses.with_raw_response.retrieve(r["id"]).http_response.json() == r
        first.append(normalized(r))
        # a message-only history: vLLM and greenfront replay it alike
        chained.append(normalized(whole(c, body(tok, "Yes.", {
            "input": "And tomorrow?", "previous_response_id": r["id"]}))))
    assert first[1] == first[0]
    assert chained[1] == chained[0]


BAD = [
    ("required-without-tools", {"input": "hi", "tool_choice": "required"}),
    ("named-without-tools", {"input": "hi", "tool_choice": {"type": "function", "name": "f"}}),
    ("named-unknown", {"input": "hi", "tools": FUNCTIONS,
                       "tool_choice": {"type": "function", "name": "nope"}}),
    ("unknown-previous", {"input": "hi", "previous_response_id": "resp_nope"}),
    ("background-without-store", {"input": "hi", "background": True, "store": False}),
    ("prompt", {"input": "hi", "prompt": {"id": "p"}}),
    ("missing-input", {}),
    ("input-not-text", {"input": 5}),
    ("unknown-model", {"input": "hi", "model": "nope"}),
    ("two-formats", {"input": "hi", "text": {"format": {"type": "json_object"}},
                     "structured_outputs": {"json_object": True}}),
    ("encrypted-reasoning", {"input": [{"type": "reasoning", "summary": [],
                                        "encrypted_content": "x"}]}),
    ("temperature-text", {"input": "hi", "temperature": "hot"}),
    ("negative-max", {"input": "hi", "max_output_tokens": -1}),
    ("max-over-context", {"input": "hi", "max_output_tokens": 100000}),
]
#: vLLM reports pydantic's 167 errors of its item union; greenfront one clear 400
STATUS_ONLY = {"unknown-item": {"input": [{"type": "web_search_call", "id": "x",
                                           "status": "completed"}]}}


def _error(c: openai.OpenAI, request: dict) -> tuple[int, dict]:
    request = with_extras({"model": "tiny", **request})
    try:
        c.responses.create(**request)
    except openai.APIStatusError as exc:
        return exc.status_code, exc.response.json()
    raise AssertionError(f"accepted: {request}")


def test_bad_inputs(pair):
    if pair.config != "plain":
        pytest.skip("once, with the plain pair")
    for name, request in BAD:
        vllm, ours = (_error(c, request) for c in pair.clients)
        assert ours == vllm, name
    for name, request in STATUS_ONLY.items():
        (vstatus, _), (status, error) = (_error(c, request) for c in pair.clients)
        assert status == vstatus == 400 and set(error["error"]) == {"message", "type", "param",
                                                                  "code"}, name
    errors = []
    for c in pair.clients:
        for call in (lambda: c.responses.retrieve("resp_nope"),
                     lambda: c.responses.cancel("resp_nope")):
            try:
                call()
            except openai.APIStatusError as exc:
                errors.append((exc.status_code, exc.response.json()))
    assert errors[2:] == errors[:2] and [status for status, _ in errors] == [404] * 4
