"""Structured outputs beside vLLM 0.32's own frontend, both on greenfront's simulator: the same
status for every bad constraint (and vLLM's message where the check is vLLM's own, the same
prefix where the text after it is the grammar library's), and for good ones the same backend
and constraint kind in the engine request (the simulator's --verbose log)."""
from __future__ import annotations

import json
import os
import re
import uuid

import pytest
import requests

from tests.integration.harness import GreenfrontServer, wait_for
from tests.interop.peers import requires_peers, vllm_frontend_on_simulator

pytestmark = requires_peers
SIM = ["--output-mode", "echo", "--itl-ms", "1", "--verbose"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory, model_dir):
    logs = str(tmp_path_factory.mktemp("so-parity"))
    with GreenfrontServer(model_dir, sim_args=" ".join(SIM)) as ours:
        with vllm_frontend_on_simulator(logs, ["--disable-log-stats"], sim_args=SIM) as peer:
            peer.engine_log = lambda: open(os.path.join(logs, "sim.log"), "rb").read().decode(
                errors="replace")
            yield peer, ours


def _chat(url: str, body: dict) -> tuple[str, requests.Response]:
    rid = uuid.uuid4().hex
    resp = requests.post(url + "/v1/chat/completions", timeout=60, headers={"X-Request-Id": rid},
                         json={"model": "tiny", "max_tokens": 2, "temperature": 0,
                               "messages": [{"role": "user", "content": "hi"}], **body})
    return rid, resp


EXACT = [
    {"structured_outputs": {"choice": []}},
    {"structured_outputs": {"grammar": "  "}},
    {"structured_outputs": {"json": " "}},
    {"structured_outputs": {"json": "{oops"}},
    {"structured_outputs": {"json_object": False}},
    {"structured_outputs": {"json": json.loads('{"a":' * 70 + "1" + "}" * 70)}},
    {"response_format": {"type": "structural_tag"}},
    {"response_format": {"type": "structural_tag", "format": {"type": "nope"}}},
    {"response_format": {"type": "structural_tag", "triggers": ["<g"], "structures": [
        {"begin": "<f>", "schema": {"type": "object"}, "end": "</f>"}]}},
    {"structured_outputs": {"structural_tag": "{bad"}},
    {"thinking_token_budget": 5.5},
    {"thinking_token_budget": 5},
    {"tools": [{"type": "function", "function": {"name": "f"}}],
     "tool_choice": {"type": "function", "function": {"name": "g"}}},
]
PREFIX = [
    ({"structured_outputs": {"regex": "(ab"}}, "Grammar error: "),
    ({"structured_outputs": {"regex": "(?=a)a"}}, "Grammar error: "),
    ({"response_format": {"type": "json_schema",
                          "json_schema": {"name": "x", "schema": {"type": "foo"}}}},
     "Grammar error: "),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": 5}}}}, "Grammar error: "),
]


@pytest.mark.parametrize("body", EXACT)
def test_refusals_read_as_vllms(pair, body):
    (_, theirs), (_, ours) = _chat(pair[0].url, body), _chat(pair[1].url, body)
    assert (ours.status_code, theirs.status_code) == (400, 400), (ours.text, theirs.text)
    assert ours.json() == theirs.json()


@pytest.mark.parametrize("body, prefix", PREFIX)
def test_grammar_refusals_share_vllms_status_and_prefix(pair, body, prefix):
    (_, theirs), (_, ours) = _chat(pair[0].url, body), _chat(pair[1].url, body)
    assert (ours.status_code, theirs.status_code) == (400, 400), (ours.text, theirs.text)
    for resp in (ours, theirs):
        assert resp.json()["error"]["message"].startswith(prefix)
        assert resp.json()["error"]["type"] == "BadRequestError"


GOOD = [
    {"structured_outputs": {"choice": ["yes", "no"]}},
    {"structured_outputs": {"regex": "[a-z]+"}},
    {"structured_outputs": {"regex": "\\p{L}+"}},
    {"structured_outputs": {"json": {"type": "integer", "multipleOf": 3}}},
    {"response_format": {"type": "json_object"}},
    {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}},
    {"response_format": {"type": "structural_tag", "format": {"type": "const_string",
                                                              "value": "hi"}}},
    {"response_format": {"type": "structural_tag", "triggers": ["<f"], "structures": [
        {"begin": "<f>", "schema": {"type": "object"}, "end": "</f>"}]}},
    {"include_reasoning": False},
]


def _engine_note(log, rid: str) -> str:
    found = []
    assert wait_for(lambda: found.extend(re.findall(rf"ADD \S*{rid}\S* (.*)", log())) or found)
    notes = found[0].split()
    return " ".join(n for n in notes if n.startswith(("structured=", "reasoning_ended=")))


@pytest.mark.parametrize("body", GOOD)
def test_engine_requests_name_the_same_constraint(pair, body):
    peer, ours = pair
    (rid_theirs, theirs), (rid_ours, mine) = _chat(peer.url, body), _chat(ours.url, body)
    assert (mine.status_code, theirs.status_code) == (200, 200), (mine.text, theirs.text)
    assert _engine_note(ours.log, rid_ours) == _engine_note(peer.engine_log, rid_theirs)
