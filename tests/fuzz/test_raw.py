"""Bodies that are not JSON objects, or not JSON, or not sent as JSON, on every POST route.

Invalid and truncated JSON, NaN and 1e999, non-UTF-8 bytes, byte-order marks, nesting far past
any parser's depth, huge bodies of one number, and content types other than application/json:
every answer is a 4xx in OpenAI's envelope (or a 2xx where the route takes no body).
"""
from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.checks import STREAM_TIMEOUT, check_answer
from tests.fuzz.strategies import junk

ROUTES = ["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize",
          "/inference/v1/generate", "/v1/load_lora_adapter", "/v1/unload_lora_adapter",
          "/collective_rpc", "/update_weight_version", "/finish_weight_update"]
VALID = {
    "/v1/completions": {"model": "tiny", "prompt": "hi", "max_tokens": 2},
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
    "/tokenize": {"prompt": "hi"}, "/detokenize": {"tokens": [1, 2]},
    "/inference/v1/generate": {"token_ids": [1, 2], "sampling_params": {"max_tokens": 2}},
    "/v1/load_lora_adapter": {"lora_name": "a", "lora_path": "/nonexistent"},
    "/v1/unload_lora_adapter": {"lora_name": "a"}, "/collective_rpc": {"method": "m"},
    "/update_weight_version": {"new_version": "v"}, "/finish_weight_update": {},
}
CONTENT_TYPES = [None, "text/plain", "application/json; charset=utf-8", "application/JSON",
                 "application/json;charset=latin-1", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=x", "application/jsonl", "*/*", "",
                 "application/json, text/plain", "\u00e9"]


def _raw_bodies(route: str) -> st.SearchStrategy:
    valid = json.dumps(VALID[route]).encode()
    return st.one_of(
        st.binary(max_size=64),
        st.integers(0, len(valid)).map(lambda n: valid[:n]),            # truncated
        st.sampled_from([b"", b"null", b"[]", b"[1,2]", b'"x"', b"1e999", b"NaN", b"-Infinity",
                         b"\xef\xbb\xbf" + valid, valid + b"garbage", valid * 2,
                         valid.replace(b"{", b'{"a":1,"a":2,', 1), b"\xff\xfe" + valid,
                         valid.decode().encode("utf-16"), b"[" * 100000, b"{\"a\":" * 5000,
                         b"9" * 100000, b'{"' + b"k" * 100000 + b'":1}',
                         b'{"model":"\\ud800"}', b'{"prompt":"\xc3\x28"}']),
        junk.map(lambda v: json.dumps(v, allow_nan=True).encode()),  # valid-ish, not objects
    )


@given(data=st.data(), route=st.sampled_from(ROUTES))
def test_raw_bodies(server, http, data, route):
    body = data.draw(_raw_bodies(route))
    resp = http.post(server.url + route, data=body, timeout=STREAM_TIMEOUT,
                     headers={"Content-Type": "application/json"})
    check_answer(resp, f"POST {route} {body[:300]!r}")


@given(route=st.sampled_from(ROUTES), content_type=st.sampled_from(CONTENT_TYPES))
def test_content_types(server, http, route, content_type):
    headers = {} if content_type is None else {"Content-Type": content_type}
    data = json.dumps(VALID[route]).encode()
    resp = http.post(server.url + route, data=data, timeout=STREAM_TIMEOUT, headers=headers)
    check_answer(resp, f"POST {route} content-type {content_type!r}")
