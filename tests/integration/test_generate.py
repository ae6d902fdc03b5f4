"""POST /inference/v1/generate on a real deployment (gunicorn + the simulator in echo mode, which
repeats the prompt after its first token, so every output is known in advance): raw HTTP,
streamed and not, both output modes, errors in the OpenAI envelope, and a client that leaves."""
from __future__ import annotations

import json
import socket

import requests

from tests.integration.harness import wait_for

PATH = "/inference/v1/generate"
PROMPT = [1, 22177, 1044, 1307]  # "<s>Hello, of"; echo emits 22177, 1044, 1307, 22177, ...


def post(server, body, **kw):
    return requests.post(server.url + PATH, json=body, timeout=30, **kw)


def events(resp) -> list:
    assert resp.status_code == 200, resp.text
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    raw = resp.content.decode()
    assert raw.endswith("data: [DONE]\n\n")
    return [json.loads(e[len("data: "):]) for e in raw.split("\n\n")[:-2]]


def test_tokens_body(server):
    r = post(server, {"token_ids": PROMPT, "sampling_params": {"max_tokens": 5},
                      "return_token_ids": True}, headers={"X-Request-Id": "hdr-1"})
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    body = r.json()
    assert list(body) == ["request_id", "model", "created", "usage", "prompt_logprobs",
                          "prompt_token_id_logprobs", "prompt_token_ids", "mm_placeholders",
                          "metrics", "kv_transfer_params", "ec_transfer_params", "output_mode",
                          "choices"]
    assert body["request_id"] == "generate-tokens-hdr-1" and body["model"] == "tiny"
    assert body["output_mode"] == "tokens" and body["prompt_token_ids"] == PROMPT
    assert body["usage"] == {"prompt_tokens": 4, "total_tokens": 9, "completion_tokens": 5,
                             "prompt_tokens_details": None, "completion_tokens_details": None}
    assert body["choices"] == [{
        "index": 0, "finish_reason": "length", "stop_reason": None,
        "token_ids": [22177, 1044, 1307, 22177, 1044], "routed_experts": None,
        "sampling_mask": None, "weight_versions": [{"version": "default", "start": 0, "end": 5}],
        "logprobs": None}]


def test_text_body_with_stop_string_and_logprobs(server):
    r = post(server, {"token_ids": PROMPT, "output_mode": "text",
                      "sampling_params": {"max_tokens": 8, "stop": [" ofHello"], "logprobs": 1}})
    (choice,) = r.json()["choices"]
    assert choice["text"] == "Hello,"  # the stop string is cut from the text
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == " ofHello"
    assert choice["token_ids"] == [22177, 1044, 1307, 22177]  # the stop string ends in the 4th
    assert [e["token"] for e in choice["logprobs"]["content"]] == ["Hello", ",", " of", "Hello"]
    assert choice["weight_versions"] == [{"version": "default", "start": 0, "end": 4}]


def test_tokens_stream_with_usage(server):
    chunks = events(post(server, {"token_ids": PROMPT, "stream": True,
                                  "sampling_params": {"max_tokens": 4, "stop_token_ids": [1307]},
                                  "stream_options": {"include_usage": True}}))
    *steps, usage = chunks
    # One chunk per engine step, but a response that falls behind merges the steps it has not
    # sent yet, so the token ids are compared joined.
    assert [t for c in steps for t in c["choices"][0]["token_ids"]] == [22177, 1044, 1307]
    assert all(list(c) == ["request_id", "usage", "output_mode", "choices"] for c in steps)
    last = steps[-1]["choices"][0]
    assert last["finish_reason"] == "stop" and last["stop_reason"] == 1307
    assert last["weight_versions"] == [{"version": "default", "start": 0, "end": 3}]
    assert usage == {"request_id": steps[0]["request_id"], "output_mode": "tokens",
                     "choices": [], "usage": {"prompt_tokens": 4, "total_tokens": 7,
                                              "completion_tokens": 3}}


def test_text_stream_puts_the_prompt_on_the_first_chunk(server):
    chunks = events(post(server, {"token_ids": PROMPT, "stream": True, "output_mode": "text",
                                  "return_token_ids": True,
                                  "sampling_params": {"max_tokens": 6, "n": 2, "seed": 3}}))
    assert "prompt_token_ids" in chunks[0] and all("prompt_token_ids" not in c
                                                   for c in chunks[1:])
    for index in (0, 1):
        mine = [c["choices"][0] for c in chunks if c["choices"][0]["index"] == index]
        assert "".join(c["text"] for c in mine) == "Hello, ofHello, of"
        assert mine[-1]["finish_reason"] == "length"


def test_bad_input_gets_the_error_envelope(server):
    cases = [
        ({"token_ids": PROMPT}, 400, "body.sampling_params"),
        ({"token_ids": [1, 10 ** 9], "sampling_params": {}}, 400, None),
        ({"token_ids": PROMPT, "sampling_params": {}, "model": "nope"}, 404, "model"),
        ({"token_ids": PROMPT, "sampling_params": {"temperature": 5}}, 400, "temperature"),
        ({"token_ids": PROMPT, "sampling_params": {"detokenize": False},
          "output_mode": "text"}, 400, "body"),
        ({"token_ids": PROMPT, "sampling_params": {},
          "content_parts": [{"type": "image_url", "url": "http://x/y.png"}]}, 400,
         "content_parts"),
    ]
    for body, status, param in cases:
        r = post(server, body)
        assert r.status_code == status, (body, r.text)
        assert r.json() == {"error": {"message": r.json()["error"]["message"],
                                      "type": r.json()["error"]["type"], "param": param,
                                      "code": status}}
    r = requests.post(server.url + PATH, data=b'{"token_ids":', timeout=30,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "JSON decode error" in r.json()["error"]["message"]
    assert requests.get(server.url + "/load", timeout=10).json() == {"server_load": 0}


def test_client_disconnect_aborts_the_engine_requests(server):
    load = lambda: requests.get(server.url + "/load", timeout=10).json()["server_load"]  # noqa: E731
    for stream in (True, False):
        payload = json.dumps({"token_ids": PROMPT, "stream": stream, "sampling_params": {
            "max_tokens": 3000, "ignore_eos": True, "n": 2}}).encode()
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        sock.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                     % len(payload) + payload)
        if stream:
            received = b""
            while b"data: " not in received:
                received += sock.recv(65536)
        assert wait_for(lambda: load() == 2)
        sock.close()
        assert wait_for(lambda: load() == 0), f"still {load()} in flight (stream={stream})"
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
