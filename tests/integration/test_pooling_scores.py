"""/classify, /score, /rerank and /v2/embed on real deployments whose engine is the simulator as
a pooling engine: a 1-label LLM reranker (``--convert classify``: cross-encoder scores) and an
embedding model (bi-encoder: cosine similarity computed by greenfront)."""
from __future__ import annotations

import base64
import json
import math
import os
import struct

import pytest
import requests

from engine.protocol import PoolingParams
from engine.sim.pooling import pooled_values

RERANKER = {"method": "from_2_way_softmax", "classifier_from_token": ["no", "yes"]}


def _model_with(model_dir: str, target, extra: dict) -> str:
    for name in os.listdir(model_dir):
        if name != "config.json":
            os.symlink(os.path.join(model_dir, name), target / name)
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    (target / "config.json").write_text(json.dumps({**config, **extra}))
    return str(target)


@pytest.fixture(scope="module")
def reranker(model_dir, tmp_path_factory):
    from tests.integration.harness import deployment
    path = _model_with(model_dir, tmp_path_factory.mktemp("reranker"), RERANKER)
    with deployment(path, sim_args="--runner pooling --convert classify --itl-ms 2") as srv:
        yield srv


@pytest.fixture(scope="module")
def embedder(embed_server):
    return embed_server  # conftest's (--runner pooling), shared with test_pooling_routes


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _ids(server, text: str) -> list[int]:
    return requests.post(server.url + "/tokenize", json={"prompt": text}).json()["tokens"]


def _score(server, text: str, activate: bool = True) -> float:
    params = PoolingParams(task="classify", use_activation=activate)
    return _f32(pooled_values(_ids(server, text), params, "classify")[0])


def _embedding(server, text: str) -> list[float]:
    return [_f32(v) for v in pooled_values(_ids(server, text), PoolingParams(task="embed"),
                                           "embed")]


def _post(server, path: str, body: dict) -> requests.Response:
    return requests.post(server.url + path, json={"model": "tiny", **body}, timeout=30)


def test_classify(reranker):
    body = _post(reranker, "/classify", {"input": ["hello world", "bad movie"],
                                         "request_id": "c1"}).json()
    assert body["id"] == "classify-c1"
    assert body["data"] == [
        {"index": 0, "label": "LABEL_0", "probs": [_score(reranker, "hello world")],
         "num_classes": 1},
        {"index": 1, "label": "LABEL_0", "probs": [_score(reranker, "bad movie")],
         "num_classes": 1}]
    raw = _post(reranker, "/classify", {"input": "hello world", "use_activation": False}).json()
    assert raw["data"][0]["probs"] == [_score(reranker, "hello world", activate=False)]


def test_cross_encoder_score_forms_and_usage(reranker):
    one = _post(reranker, "/score", {"text_1": "hello", "text_2": "world"}).json()
    assert one["data"] == [{"index": 0, "object": "score", "score": _score(reranker, "helloworld")}]
    assert one["usage"]["prompt_tokens"] == len(_ids(reranker, "helloworld"))
    for form in (("queries", "documents"), ("data_1", "data_2"), ("queries", "items")):
        many = _post(reranker, "/v1/score", {form[0]: "hello", form[1]: ["world", "there"]})
        assert [d["score"] for d in many.json()["data"]] == [
            _score(reranker, "helloworld"), _score(reranker, "hellothere")], form
    pairs = _post(reranker, "/score", {"queries": ["a", "b"], "documents": ["c", "d"]}).json()
    assert [d["score"] for d in pairs["data"]] == [_score(reranker, "ac"), _score(reranker, "bd")]


def test_rerank_orders_and_cuts(reranker):
    docs = ["world", "hello there", "x", "bad movie"]
    for path in ("/rerank", "/v1/rerank", "/v2/rerank"):
        body = _post(reranker, path, {"query": "hello", "documents": docs, "top_n": 2,
                                      "request_id": "r1"}).json()
        assert list(body) == ["id", "model", "usage", "results"] and body["id"] == "score-r1"
        expected = sorted(((_score(reranker, "hello" + d), i) for i, d in enumerate(docs)),
                          reverse=True)[:2]
        assert [(r["relevance_score"], r["index"]) for r in body["results"]] == expected
        assert body["results"][0]["document"] == {"text": docs[expected[0][1]],
                                                  "multi_modal": None}
        tokens = sum(len(_ids(reranker, "hello" + d)) for d in docs)
        assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}


def test_bi_encoder_cosine(embedder):
    body = _post(embedder, "/score", {"queries": "hello", "documents": ["world", "hi"]}).json()
    q = _embedding(embedder, "hello")
    for item, doc in zip(body["data"], ["world", "hi"]):
        d = _embedding(embedder, doc)
        cosine = sum(a * b for a, b in zip(q, d)) / math.sqrt(
            sum(a * a for a in q) * sum(b * b for b in d))
        assert math.isclose(item["score"], cosine, abs_tol=1e-6)
    assert body["usage"]["prompt_tokens"] == sum(len(_ids(embedder, t))
                                                 for t in ("hello", "world", "hi"))


def test_cohere_v2_embed(embedder):
    body = _post(embedder, "/v2/embed", {"texts": ["hello world"],
                                         "embedding_types": ["float", "base64", "ubinary"]})
    out = body.json()
    vector = _embedding(embedder, "hello world")
    assert out["embeddings"]["float"] == [vector]
    raw = base64.b64decode(out["embeddings"]["base64"][0])
    assert list(struct.unpack(f"<{len(vector)}f", raw)) == vector
    assert len(out["embeddings"]["ubinary"][0]) == len(vector) // 8
    assert out["texts"] == ["hello world"] and out["response_type"] == "embeddings_by_type"
    assert out["meta"]["billed_units"] == {"input_tokens": len(_ids(embedder, "hello world")),
                                           "image_tokens": 0}


@pytest.mark.parametrize("server, path, body, message", [
    ("reranker", "/score", {"queries": ["a", "b"], "documents": ["c", "d", "e"]},
     "Input lengths must be either 1:1, 1:N or N:N"),
    ("reranker", "/score", {"queries": [], "documents": ["c"]},
     "At least one text element must be given"),
    ("reranker", "/rerank", {"query": "q", "documents": ["c"], "top_n": -1},
     "greater than or equal to 0"),
    ("reranker", "/rerank", {"query": "q", "documents": [{"content": []}]},
     "MultiModalParam is not supported"),
    ("reranker", "/classify", {"input": "x", "normalize": False}, "`normalize` was removed"),
    ("reranker", "/rerank", {"documents": ["c"]}, "Field required"),
    ("embedder", "/v2/embed", {}, "Exactly one of texts, images, or inputs"),
    ("embedder", "/v2/embed", {"texts": ["x"], "input_type": "query"},
     "Unsupported input_type 'query'"),
    ("embedder", "/v2/embed", {"texts": ["a b c d"], "truncate": "NONE", "max_tokens": 2},
     "exceeds max_tokens=2 with truncate=NONE"),
    ("embedder", "/score", {"text_1": "a", "text_2": "b", "max_tokens_per_doc": -1},
     "max_tokens_per_doc must be a non-negative integer"),
])
def test_bad_requests(request, server, path, body, message):
    srv = request.getfixturevalue(server)
    r = _post(srv, path, body)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]["message"]
    assert _post(srv, "/pooling", {"input": "x"}).status_code == 200
