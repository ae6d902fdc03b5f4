"""Bad input gets a clear 4xx in OpenAI's envelope and leaves nothing behind."""
from __future__ import annotations

import pytest
import requests
from tests.support.errors import error_of


def _post(server, path, body=None, data=None, headers=None):
    if data is None:
        return requests.post(server.url + path, json=body, headers=headers, timeout=30)
    return requests.post(server.url + path, data=data,
                         headers=headers or {"Content-Type": "application/json"}, timeout=30)


_error = error_of


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions", "/tokenize"])
def test_invalid_json(server, path):
    err = _error(_post(server, path, data=b'{"model":"tiny","prompt":"hi",'), 400)
    assert "JSON decode error" in err["message"]


def test_wrong_content_type(server):
    err = _error(_post(server, "/v1/completions", data=b'{"prompt":"hi"}',
                       headers={"Content-Type": "text/plain"}), 400)
    assert "application/json" in err["message"]


def test_body_not_an_object(server):
    _error(_post(server, "/v1/completions", data=b"[1,2]"), 400)


def test_wrong_types(server):
    err = _error(_post(server, "/v1/completions", {"prompt": "hi", "max_tokens": "ten"}), 400)
    assert err["param"] == "body.max_tokens"
    err = _error(_post(server, "/v1/chat/completions", {"messages": "hi"}), 400)
    assert err["param"] == "body.messages"


def test_unknown_model(server):
    for path, body in [("/v1/completions", {"model": "nope", "prompt": "hi"}),
                       ("/v1/chat/completions",
                        {"model": "nope", "messages": [{"role": "user", "content": "hi"}]}),
                       ("/tokenize", {"model": "nope", "prompt": "hi"})]:
        err = _error(_post(server, path, body), 404)
        assert err["message"] == "The model `nope` does not exist. Valid aliases: tiny."
        assert err["type"] == "NotFoundError"


def test_negative_max_tokens(server):
    err = _error(_post(server, "/v1/completions", {"prompt": "hi", "max_tokens": -1}), 400)
    assert err["message"] == ("max_tokens must be at least 1, got -1. "
                              "(parameter=max_tokens, value=-1)")
    assert err["param"] == "max_tokens"


def test_prompt_longer_than_max_model_len(server):
    max_len = requests.get(server.url + "/v1/models", timeout=10).json()["data"][0]["max_model_len"]
    long_prompt = [1000 + (i % 200) for i in range(max_len + 50)]
    for path, body in [("/v1/completions", {"prompt": long_prompt}),
                       ("/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "word " * (max_len + 50)}]})]:
        err = _error(_post(server, path, body), 400)
        assert "maximum context length" in err["message"]


def test_temperature_out_of_range(server):
    err = _error(_post(server, "/v1/completions", {"prompt": "hi", "temperature": 3}), 400)
    assert err["param"] == "temperature"


def test_body_too_large(make_server, model_dir):
    srv = make_server(env={"GREENFRONT_MAX_BODY_BYTES": "1000"})
    _error(_post(srv, "/tokenize", {"prompt": "x" * 5000}), 413)


def test_errors_leave_no_request_behind(server):
    for _ in range(3):
        _post(server, "/v1/completions", {"prompt": "hi", "max_tokens": -1})
    assert requests.get(server.url + "/load", timeout=10).json() == {"server_load": 0}
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
