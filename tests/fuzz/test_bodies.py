"""Generated request bodies for every endpoint, from greenfront's own field tables.

Each case is POSTed to the one deployment; ``check_answer`` holds every answer to the contract
(2xx, or a 4xx in OpenAI's envelope; streams end without a 5xx error event). The module's
``server`` fixture then checks the deployment healthy and drained.
"""
from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from resources.admin.dev import FINISH_WEIGHT_UPDATE_FIELDS, UPDATE_WEIGHT_VERSION_FIELDS
from resources.admin.lora import LOAD_FIELDS, UNLOAD_FIELDS
from resources.chat import types as chat_types
from resources.common.fields import MISSING, v_any, v_dict, v_float, v_list, v_nullable, v_str
from resources.completions import types as completion_types
from resources.generate import types as generate_types
from resources.messages import types as messages_types
from resources.tokenize import types as tokenize_types
from tests.fuzz.checks import STREAM_TIMEOUT, check_answer
from tests.fuzz.strategies import body_for, value_for, with_faults

MAX_STOP_STRINGS = 4  # VLLM_MAX_STOP_STRINGS, left at its default in the deployment


def _encode(body: Any) -> bytes:
    # allow_nan: NaN/Infinity drawn as values go out as the invalid JSON tokens they are.
    return json.dumps(body, allow_nan=True).encode()


def _post(server, http, path: str, body: Any) -> None:
    data = _encode(body)
    stream = isinstance(body, dict) and bool(body.get("stream"))
    resp = http.post(server.url + path, data=data, stream=stream, timeout=STREAM_TIMEOUT,
                     headers={"Content-Type": "application/json"})
    with resp:
        check_answer(resp, f"POST {path} {data[:2000]!r}")


# ---- OpenAI endpoints ------------------------------------------------------------------------

_PROMPT = st.fixed_dictionaries({"stream": st.booleans(), "prompt": st.one_of(
    st.text(min_size=1, max_size=40), st.lists(st.integers(0, 131071), min_size=1, max_size=12),
    st.lists(st.text(max_size=10), min_size=1, max_size=3))})
_MESSAGES = st.fixed_dictionaries({"stream": st.booleans(), "messages": st.lists(st.fixed_dictionaries({
    "role": st.sampled_from(["user", "system", "assistant", "developer"]),
    "content": st.text(min_size=1, max_size=30)}), min_size=1, max_size=3)})
_TOKEN_IDS = st.fixed_dictionaries({"stream": st.booleans(), "token_ids": st.lists(st.integers(0, 131071), min_size=1,
                                                          max_size=12)})


@given(body=with_faults(body_for(completion_types.fields(MAX_STOP_STRINGS), base=_PROMPT)))
def test_completions(server, http, body):
    _post(server, http, "/v1/completions", body)


@given(body=with_faults(body_for(chat_types.fields(MAX_STOP_STRINGS), base=_MESSAGES)))
def test_chat_completions(server, http, body):
    _post(server, http, "/v1/chat/completions", body)


_ANTHROPIC = st.fixed_dictionaries({"stream": st.booleans(), "max_tokens": st.integers(1, 20),
                                    "messages": st.lists(st.fixed_dictionaries({
                                        "role": st.sampled_from(["user", "assistant", "system"]),
                                        "content": st.text(min_size=1, max_size=30)}),
                                        min_size=1, max_size=3)})


@given(body=with_faults(body_for(messages_types.fields(MAX_STOP_STRINGS), base=_ANTHROPIC)))
def test_messages(server, http, body):
    _post(server, http, "/v1/messages", body)


@given(body=with_faults(body_for(messages_types.COUNT_FIELDS, base=_ANTHROPIC)))
def test_messages_count_tokens(server, http, body):
    _post(server, http, "/v1/messages/count_tokens", body)


@given(body=with_faults(st.one_of(body_for(tokenize_types.COMPLETION_FIELDS),
                                  body_for(tokenize_types.CHAT_FIELDS))))
def test_tokenize(server, http, body):
    _post(server, http, "/tokenize", body)


@given(body=with_faults(body_for(tokenize_types.DETOKENIZE_FIELDS)))
def test_detokenize(server, http, body):
    _post(server, http, "/detokenize", body)


# ---- vLLM's token-in/token-out endpoint ------------------------------------------------------

_SAMPLING_PARAMS = st.fixed_dictionaries({
    "sampling_params": body_for(generate_types.SAMPLING, 1, model=False)})


@given(body=with_faults(body_for(generate_types.HEAD + generate_types.TAIL,
                                 base=st.tuples(_SAMPLING_PARAMS, _TOKEN_IDS).map(
                                     lambda t: {**t[0], **t[1]}))))
def test_generate(server, http, body):
    _post(server, http, "/inference/v1/generate", body)


# ---- admin and LoRA routes (on in this deployment) -------------------------------------------

COLLECTIVE_RPC_FIELDS = [  # the checks CollectiveRpcResource makes, as a table to draw from
    ("method", v_str(), MISSING), ("timeout", v_nullable(v_float()), None),
    ("args", v_list(v_any()), None), ("kwargs", v_dict(), None),
]
ADMIN_BODIES = {
    "/v1/load_lora_adapter": LOAD_FIELDS,
    "/v1/unload_lora_adapter": UNLOAD_FIELDS,
    "/finish_weight_update": FINISH_WEIGHT_UPDATE_FIELDS,
    "/update_weight_version": UPDATE_WEIGHT_VERSION_FIELDS,
    "/collective_rpc": COLLECTIVE_RPC_FIELDS,
}


@given(route=st.sampled_from(sorted(ADMIN_BODIES)), data=st.data())
def test_admin_routes(server, http, route, data):
    body = data.draw(with_faults(body_for(ADMIN_BODIES[route], model=False)))
    _post(server, http, route, body)


@given(name=st.sampled_from(["level", "mode", "tags", "reset_running_requests",
                             "reset_external", "include_dp", "config_format"]),
       value=st.one_of(st.text(max_size=8), st.sampled_from(["1", "-1", "true", "json", "x"])),
       route=st.sampled_from(["/reset_prefix_cache", "/wake_up", "/is_sleeping",
                              "/get_world_size", "/server_info", "/is_paused", "/weight_info"]))
def test_admin_query_parameters(server, http, name, value, route):
    method = "GET" if route in ("/is_sleeping", "/get_world_size", "/server_info",
                                "/is_paused", "/weight_info") else "POST"
    resp = http.request(method, server.url + route, params={name: value},
                        timeout=STREAM_TIMEOUT)
    check_answer(resp, f"{method} {route}?{name}={value!r}")


def test_value_for_covers_every_table():
    """Every field of every table has a spec (else its values would be junk only)."""
    tables = [completion_types.fields(MAX_STOP_STRINGS), chat_types.fields(MAX_STOP_STRINGS),
              tokenize_types.COMPLETION_FIELDS, tokenize_types.CHAT_FIELDS,
              tokenize_types.DETOKENIZE_FIELDS, generate_types.HEAD, generate_types.TAIL,
              generate_types.SAMPLING, messages_types.fields(MAX_STOP_STRINGS),
              messages_types.COUNT_FIELDS, *ADMIN_BODIES.values()]
    missing = [name for table in tables for name, validator, _ in table
               if not hasattr(validator, "spec")]
    assert missing == []
    assert value_for(v_str()) is not None
