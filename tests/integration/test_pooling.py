"""The pooling endpoints on a real deployment whose engine is the simulator as a pooling engine
(``--runner pooling``): the official ``openai`` client's ``embeddings.create``, plain HTTP for
/pooling, the wire values vLLM's frontend sends (checked through the simulator's deterministic
vectors), and the refusals."""
from __future__ import annotations

import base64
import json
import math
import os
import struct

import openai
import pytest
import requests

from engine.protocol import PoolingParams
from engine.sim.pooling import pooled_values


@pytest.fixture(scope="module")
def matryoshka_dir(model_dir, tmp_path_factory) -> str:
    """The test model with ``is_matryoshka`` in its config.json (``dimensions`` accepted)."""
    target = tmp_path_factory.mktemp("matryoshka")
    for name in os.listdir(model_dir):
        if name != "config.json":
            os.symlink(os.path.join(model_dir, name), target / name)
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    (target / "config.json").write_text(json.dumps({**config, "is_matryoshka": True}))
    return str(target)


@pytest.fixture(scope="module")
def embed(matryoshka_dir):
    from tests.integration.harness import deployment
    with deployment(matryoshka_dir, sim_args="--runner pooling --itl-ms 2 --ttft-ms 2") as srv:
        yield srv


def _expected(ids: list[int], **params) -> list[float]:
    """The simulator's vector for ``ids`` as float32 (what crossed the wire)."""
    values = pooled_values(ids, PoolingParams(task="embed", **params), "embed")
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def _tokens(server, text: str, add_special_tokens: bool = True) -> list[int]:
    r = requests.post(server.url + "/tokenize", json={"prompt": text,
                                                      "add_special_tokens": add_special_tokens})
    return r.json()["tokens"]


def test_openai_client_embeddings_float_and_base64(embed):
    client = openai.OpenAI(base_url=embed.url + "/v1", api_key="x")
    result = client.embeddings.create(model="tiny", input=["hello world", "second one"],
                                      encoding_format="float")
    assert [d.index for d in result.data] == [0, 1]
    hello, second = _tokens(embed, "hello world"), _tokens(embed, "second one")
    assert result.data[0].embedding == _expected(hello)
    assert result.data[1].embedding == _expected(second)
    assert result.usage.prompt_tokens == result.usage.total_tokens == len(hello) + len(second)
    # The client's default asks for base64 and decodes little-endian float32 itself.
    default = client.embeddings.create(model="tiny", input="hello world")
    assert default.data[0].embedding == _expected(hello)


def test_raw_http_answer_shape(embed):
    r = requests.post(embed.url + "/v1/embeddings", headers={"X-Request-Id": "rid-1"},
                      json={"model": "tiny", "input": [1, 2, 3, 4], "encoding_format": "base64"})
    body = r.json()
    assert list(body) == ["id", "object", "created", "model", "data", "usage"]
    assert body["id"] == "embd-rid-1" and body["object"] == "list" and body["model"] == "tiny"
    raw = base64.b64decode(body["data"][0]["embedding"])
    assert list(struct.unpack(f"<{len(raw) // 4}f", raw)) == _expected([1, 2, 3, 4])
    assert body["usage"] == {"prompt_tokens": 4, "total_tokens": 4, "completion_tokens": 0,
                             "prompt_tokens_details": None, "completion_tokens_details": None}


def test_dimensions_truncation_activation_and_chat(embed):
    post = lambda body: requests.post(embed.url + "/v1/embeddings",  # noqa: E731
                                      json={"model": "tiny", **body}).json()
    ids = _tokens(embed, "hello world")
    vector = post({"input": "hello world", "dimensions": 8})["data"][0]["embedding"]
    assert vector == _expected(ids, dimensions=8)
    assert math.isclose(sum(v * v for v in vector), 1.0, rel_tol=1e-5)
    raw = post({"input": "hello world", "use_activation": False})["data"][0]["embedding"]
    assert raw == _expected(ids, use_activation=False)
    # truncate_prompt_tokens keeps the first tokens, BOS included.
    long_ids = _tokens(embed, "a b c d e f g")
    cut = post({"input": "a b c d e f g", "truncate_prompt_tokens": 3})
    assert cut["data"][0]["embedding"] == _expected(long_ids[:3])
    assert cut["usage"]["prompt_tokens"] == 3
    chat = post({"messages": [{"role": "user", "content": "hi"}]})
    rendered = requests.post(embed.url + "/tokenize", json={
        "messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False}).json()
    assert chat["data"][0]["embedding"] == _expected(rendered["tokens"])


def test_pooling_route(embed):
    r = requests.post(embed.url + "/pooling", json={"model": "tiny", "input": "hello world",
                                                     "request_id": "p1"})
    body = r.json()
    assert body["id"] == "pooling-p1" and body["data"][0]["object"] == "pooling"
    assert body["data"][0]["data"] == _expected(_tokens(embed, "hello world"))


@pytest.mark.parametrize("path, body, status, message", [
    ("/pooling", {"input": "x", "task": "token_embed"}, 400,
     "Try switching the model's pooling_task via --pooler-config.task token_embed."),
    ("/pooling", {"input": "x", "task": "classify"}, 400,
     "Unsupported task: 'classify' Supported tasks: ['embed', 'token_embed']"),
    ("/pooling", {"input": "x", "dimensions": 8}, 400, "dimensions is currently not supported"),
    ("/v1/embeddings", {"input": "x", "normalize": True}, 400,
     "Parameter `normalize` was removed; use `use_activation` instead."),
    ("/v1/embeddings", {"input": "x", "dimensions": 129}, 400,
     "Model 'tiny' only supports dimensions in range [1, 128], got 129."),
    ("/v1/embeddings", {"input": []}, 400, "You must pass at least one prompt"),
    ("/v1/embeddings", {"input": "x", "encoding_format": "bytes"}, 400, "does not implement"),
    ("/v1/embeddings", {"input": [10 ** 9]}, 400, "out of vocabulary"),
    ("/v1/embeddings", {"input": "x", "truncate_prompt_tokens": 10 ** 6}, 400,
     "truncate_prompt_tokens value is greater than max_model_len."),
    ("/v1/embeddings", {}, 400, "Field required"),
])
def test_bad_requests_are_4xx_and_leave_nothing(embed, path, body, status, message):
    r = requests.post(embed.url + path, json={"model": "tiny", **body})
    assert r.status_code == status, r.text
    assert message in r.json()["error"]["message"]
    ok = requests.post(embed.url + "/v1/embeddings", json={"model": "tiny", "input": "x"})
    assert ok.status_code == 200
