"""Structured outputs end to end: bad constraints get a 400 and never reach the engine; the
backend the deployment is configured for is the one the engine request names; the server's
default chat template kwargs reach the template under the request's own."""
from __future__ import annotations

import json
import re
import uuid

import pytest
import requests

from tests.integration.harness import deployments, wait_for

TEMPLATE = ("{% for m in messages %}{{ m['content'] }}{% endfor %}"
            "|{{ flavour }}|{{ cohere_format }}|{{ enable_thinking }}")


SIM = "--output-mode echo --itl-ms 1 --verbose"


@pytest.fixture(scope="module")
def _servers(model_dir, marker_model_dir):
    """The module's three deployments, started at once: auto, guidance, reasoning."""
    guidance = {"GREENFRONT_STRUCTURED_OUTPUTS_BACKEND": "guidance",
                "GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS": json.dumps({"flavour": "plain",
                                                                       "enable_thinking": True}),
                "GREENFRONT_CHAT_TEMPLATE": TEMPLATE}
    with deployments((model_dir, {"sim_args": SIM}),
                     (model_dir, {"env": guidance, "sim_args": SIM}),
                     (marker_model_dir, {"env": {"GREENFRONT_REASONING_PARSER": "qwen3"},
                                         "sim_args": SIM})) as servers:
        yield servers


@pytest.fixture(scope="module")
def auto_server(_servers):
    return _servers[0]


@pytest.fixture(scope="module")
def guidance_server(_servers):
    return _servers[1]


def _post(srv, path: str, body: dict) -> tuple[str, requests.Response]:
    rid = uuid.uuid4().hex
    base = {"model": "tiny", "max_tokens": 3, "temperature": 0}
    if path == "/v1/chat/completions":
        base["messages"] = [{"role": "user", "content": "hi"}]
    else:
        base["prompt"] = "hi"
    resp = requests.post(srv.url + path, json={**base, **body},
                         headers={"X-Request-Id": rid}, timeout=30)
    return rid, resp


def _adds(srv, rid: str) -> list[str]:
    return re.findall(rf"engine\.sim rank=0 ADD \S*{rid}\S* .*", srv.log())


BAD = [
    ({"structured_outputs": {"choice": []}}, "Choice '[]' cannot be an empty list"),
    ({"structured_outputs": {"grammar": " "}},
     "structured_outputs.grammar cannot be an empty string"),
    ({"structured_outputs": {"regex": "(ab"}}, "Grammar error: invalid regex"),
    ({"structured_outputs": {"regex": "(?=a)a"}}, "Grammar error: invalid regex"),
    ({"structured_outputs": {"json": "{oops"}}, "Invalid JSON grammar specification."),
    ({"response_format": {"type": "json_schema",
                          "json_schema": {"name": "x", "schema": {"type": "foo"}}}},
     "Grammar error: "),
    ({"response_format": {"type": "structural_tag"}},
     "Invalid response_format structural_tag specification. (parameter=response_format)"),
    ({"response_format": {"type": "structural_tag", "format": {"type": "nope"}}},
     "Invalid response_format structural_tag specification. (parameter=response_format)"),
    ({"structured_outputs": {"structural_tag": "{bad"}},
     "Invalid structured_outputs structural_tag specification."),
]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
@pytest.mark.parametrize("body, message", BAD)
def test_bad_constraints_are_refused_before_the_engine(auto_server, path, body, message):
    rid, resp = _post(auto_server, path, body)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"].startswith(message), error
    assert error["type"] == "BadRequestError"
    # A good request after it reaches the engine and is logged; the bad one never was.
    good, ok = _post(auto_server, path, {"structured_outputs": {"regex": "[a-z]+"}})
    assert ok.status_code == 200, ok.text
    assert wait_for(lambda: _adds(auto_server, good))
    assert _adds(auto_server, rid) == []


def test_named_tool_choice_not_in_tools_is_refused(auto_server):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    rid, resp = _post(auto_server, "/v1/chat/completions", {
        "tools": tools, "tool_choice": {"type": "function", "function": {"name": "g"}}})
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == "tool_choice"
    assert "does not match any of the specified `tools`" in resp.json()["error"]["message"]
    assert _adds(auto_server, rid) == []


def test_auto_backend_as_vllm_resolves_it(auto_server):
    cases = [({"structured_outputs": {"choice": ["yes", "no"]}}, "xgrammar:grammar:auto"),
             ({"structured_outputs": {"json": {"type": "integer", "multipleOf": 3}}},
              "guidance:json:auto"),
             ({"response_format": {"type": "json_object"}}, "xgrammar:json_object:auto"),
             ({"response_format": {"type": "structural_tag", "format": {
                 "type": "const_string", "value": "hi"}}}, "xgrammar:structural_tag:auto")]
    for body, expected in cases:
        rid, resp = _post(auto_server, "/v1/chat/completions", body)
        assert resp.status_code == 200, resp.text
        assert wait_for(lambda: _adds(auto_server, rid))
        assert f"structured={expected}" in _adds(auto_server, rid)[0]


def test_configured_backend_is_named_and_choices_stay_choices(guidance_server):
    rid, resp = _post(guidance_server, "/v1/completions",
                      {"structured_outputs": {"choice": ["yes", "no"]}})
    assert resp.status_code == 200, resp.text
    assert wait_for(lambda: _adds(guidance_server, rid))
    assert "structured=guidance:choice " in _adds(guidance_server, rid)[0] + " "


def test_default_chat_template_kwargs_under_the_requests(guidance_server):
    def prompt(body: dict) -> str:
        _, resp = _post(guidance_server, "/v1/chat/completions",
                        {"return_prompt_text": True, **body})
        assert resp.status_code == 200, resp.text
        return resp.json()["prompt_text"]
    assert prompt({}) == "hi|plain|cmd4|True"
    assert prompt({"chat_template_kwargs": {"flavour": "spicy"}}) == "hi|spicy|cmd4|True"
    # None and "auto" leave the server's default in place, as vLLM merges them.
    assert prompt({"chat_template_kwargs": {"flavour": None}}) == "hi|plain|cmd4|True"
    assert prompt({"chat_template_kwargs": {"enable_thinking": False}}) == "hi|plain|cmd4|False"
    assert prompt({"reasoning_effort": "none"}) == "hi|plain|cmd4|False"


def test_include_reasoning_false_constrains_from_the_first_token(auto_server):
    rid, resp = _post(auto_server, "/v1/chat/completions",
                      {"include_reasoning": False, "response_format": {"type": "json_object"}})
    assert resp.status_code == 200, resp.text
    assert wait_for(lambda: _adds(auto_server, rid))
    assert "reasoning_ended=True" in _adds(auto_server, rid)[0]
    plain, resp = _post(auto_server, "/v1/chat/completions", {})
    assert wait_for(lambda: _adds(auto_server, plain))
    assert "reasoning_ended" not in _adds(auto_server, plain)[0]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
@pytest.mark.parametrize("budget", [5.5, True, -3, 2.0])
def test_thinking_token_budget_must_be_an_integer(auto_server, path, budget):
    rid, resp = _post(auto_server, path, {"thinking_token_budget": budget})
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["message"] == ("`thinking_token_budget` must be a non-negative integer or -1 "
                                f"for unlimited. (parameter=thinking_token_budget, value={budget})")
    assert error["param"] == "thinking_token_budget"
    assert _adds(auto_server, rid) == []


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_thinking_token_budget_needs_a_reasoning_parser(auto_server, path):
    rid, resp = _post(auto_server, path, {"thinking_token_budget": 5})
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["message"].startswith(
        "thinking_token_budget is set but reasoning_config is not configured.")
    assert _adds(auto_server, rid) == []
    unlimited, resp = _post(auto_server, path, {"thinking_token_budget": -1})
    assert resp.status_code == 200, resp.text


@pytest.fixture(scope="module")
def reasoning_server(_servers):
    return _servers[2]


def test_with_a_reasoning_parser_the_engine_learns_when_the_thought_ends(reasoning_server):
    def note(body: dict) -> str:
        rid, resp = _post(reasoning_server, "/v1/chat/completions",
                          {"response_format": {"type": "json_object"}, **body})
        assert resp.status_code == 200, resp.text
        assert wait_for(lambda: _adds(reasoning_server, rid))
        return _adds(reasoning_server, rid)[0]
    assert "reasoning_ended=False" in note({})  # the grammar waits for </think>
    assert "reasoning_ended=True" in note({"chat_template_kwargs": {"enable_thinking": False}})
    assert "reasoning_ended=True" in note({"include_reasoning": False})
    budget = note({"thinking_token_budget": 5})
    assert "thinking_token_budget=5" in budget and "reasoning_ended=False" in budget
