"""X-Vllm-Priority and X-Session-ID: vLLM 0.32's sources and precedence, onto the ADD on the wire."""
from __future__ import annotations

import falcon.testing
import msgspec
import pytest

from engine.protocol import encode_add
from base.errors import InvalidRequest
from resources.completions import prepare_completion
from resources.generate.convert import prepare_generate
from resources.request_headers import apply_request_headers
from streaming.submit import start_generation
from tests.unit.resources.test_model_resolution import FakeClient


def _sent(ctx, body: dict, headers: dict, prepare=prepare_completion, from_body=True):
    req = falcon.testing.create_req(headers=headers)
    prepared = prepare(body, ctx)
    apply_request_headers(prepared, req, body, from_body=from_body)
    client = FakeClient()
    start_generation(prepared, client)
    return client.sent


BODY = {"prompt": "x", "max_tokens": 2}


@pytest.mark.parametrize("headers, body, priority", [
    ({}, {}, 0), ({}, {"priority": 3}, 3), ({"X-Vllm-Priority": "-7"}, {"priority": 3}, -7),
    ({"X-Vllm-Priority": " 12 "}, {}, 12),  # int() takes what it takes
    ({"X-Vllm-Priority": "high"}, {"priority": 3}, 3),  # unreadable: the body's stays
])
def test_priority_header_overrides_the_body(ctx, headers, body, priority):
    sent = _sent(ctx, {**BODY, **body}, headers)
    assert [r.priority for r in sent] == [priority]


def test_a_priority_past_int64_is_a_400(ctx):
    with pytest.raises(InvalidRequest) as info:
        _sent(ctx, BODY, {"X-Vllm-Priority": str(2 ** 63)})
    assert info.value.status == 400 and info.value.param == "X-Vllm-Priority"


@pytest.mark.parametrize("headers, body, session", [
    ({}, {}, None),
    ({"X-Session-ID": "hdr"}, {}, "hdr"),
    ({"X-Session-ID": "hdr"}, {"session_id": "own"}, "own"),
    ({}, {"vllm_xargs": {"session_id": "xarg"}}, "xarg"),
    ({"X-Session-ID": "hdr"}, {"vllm_xargs": {"session_id": "xarg"}}, "hdr"),
    ({}, {"vllm_xargs": {"session_id": 5}}, None),
])
def test_session_id_sources_in_vllms_order(ctx, headers, body, session):
    sent = _sent(ctx, {**BODY, "n": 2, "temperature": 1.0, **body}, headers)
    assert [r.session_id for r in sent] == [session, session]
    if session is not None:  # element 20 of the ADD array
        assert msgspec.msgpack.decode(encode_add(b"\x00\x00", sent[0])[2])[20] == session


def test_generate_takes_the_session_header_only(ctx):
    body = {"token_ids": [1, 2], "sampling_params": {"max_tokens": 1}, "priority": 2}
    sent = _sent(ctx, body, {"X-Session-ID": "s", "X-Vllm-Priority": "9"},
                 prepare=prepare_generate, from_body=False)
    assert (sent[0].session_id, sent[0].priority) == ("s", 2)
