"""Pooling models on real vLLM 0.32 CPU engines: ``vllm serve --runner pooling`` with greenfront
as its frontend beside vLLM's own Python frontend, for an embedding model (Matryoshka) and a
1-label LLM reranker (``--convert classify``). Good requests give the same answers (vectors and
scores equal to 1e-3, see ``TOLERANCE``; ids and timestamps aside), bad ones the same status
and error, and a generation request is refused with 404 before it can kill the engine, which
keeps serving.
"""
from __future__ import annotations

import json
import math
import os

import pytest
import requests

from tests.interop.peers import MODEL, VllmProcess, requires_peers
from tests.support.processes import free_port
from tests.support.vllm_peers import SERVE_ARGS
from tests.interop.peers import GREENFRONT

pytestmark = requires_peers

CONFIGS = {
    "embed": (["--runner", "pooling", "--convert", "embed"], {"is_matryoshka": True}),
    "classify": (["--runner", "pooling", "--convert", "classify"],
                 {"method": "from_2_way_softmax", "classifier_from_token": ["no", "yes"]}),
}


def _model(kind: str, root) -> str:
    """The tiny model with ``kind``'s config.json keys (every other file a symlink)."""
    target = root / f"tiny-{kind}"
    target.mkdir()
    for name in os.listdir(MODEL):
        if name != "config.json":
            os.symlink(os.path.join(MODEL, name), target / name)
    with open(os.path.join(MODEL, "config.json")) as f:
        config = json.load(f)
    (target / "config.json").write_text(json.dumps({**config, **CONFIGS[kind][1]}))
    return str(target)


def _serve(model: str, kind: str, log: str, greenfront: bool) -> VllmProcess:
    port = free_port()
    env = ({"VLLM_USE_RUST_FRONTEND": "1", "VLLM_RUST_FRONTEND_PATH": GREENFRONT}
           if greenfront else None)
    return VllmProcess(["--port", str(port)] + SERVE_ARGS + CONFIGS[kind][0], log, port=port,
                       env=env, model=model)


@pytest.fixture(scope="module", params=list(CONFIGS))
def stacks(request, tmp_path_factory):
    kind = request.param
    root = tmp_path_factory.mktemp(f"pooling-{kind}")
    model = _model(kind, root)
    ours = _serve(model, kind, str(root / "greenfront.log"), True)
    theirs = _serve(model, kind, str(root / "python.log"), False)
    try:
        yield kind, ours.wait_healthy(), theirs.wait_healthy()
    finally:
        ours.kill()
        theirs.kill()


GOOD = {
    "embed": [
        ("/v1/embeddings", {"input": "hello world"}),
        ("/v1/embeddings", {"input": ["hello world", "second one"]}),
        ("/v1/embeddings", {"input": [1, 2, 3, 4]}),
        ("/v1/embeddings", {"input": "hello world", "encoding_format": "base64"}),
        ("/v1/embeddings", {"input": "hello world", "dimensions": 8}),
        ("/v1/embeddings", {"input": "hello world", "use_activation": False}),
        ("/v1/embeddings", {"input": "a b c d e f g", "truncate_prompt_tokens": 3}),
        ("/v1/embeddings", {"messages": [{"role": "user", "content": "hi"}]}),
        ("/pooling", {"input": "hello world"}),
        ("/score", {"queries": "hello", "documents": ["world", "hello there"]}),
        ("/v1/score", {"text_1": ["a", "b"], "text_2": ["c", "d"]}),
        ("/rerank", {"query": "hello", "documents": ["world", "hello there", "x"], "top_n": 2}),
        ("/v2/rerank", {"query": "hello", "documents": ["world"]}),
        ("/v2/embed", {"texts": ["hello world"], "embedding_types": ["float", "ubinary"]}),
    ],
    "classify": [
        ("/classify", {"input": "hello world"}),
        ("/classify", {"input": ["hello world", "bad movie"]}),
        ("/classify", {"input": "hello world", "use_activation": False}),
        ("/pooling", {"input": "hello world"}),
        ("/score", {"text_1": "hello", "text_2": "world"}),
        ("/score", {"queries": "hello", "documents": ["world", "hello there"]}),
        ("/rerank", {"query": "hello", "documents": ["world", "hello there", "x"], "top_n": 2}),
        ("/v1/rerank", {"query": "hello", "documents": ["a", "b"]}),
    ],
}
BAD = {
    "embed": [
        ("/pooling", {"input": "x", "task": "token_embed"}),
        ("/pooling", {"input": "x", "task": "classify"}),
        ("/pooling", {"input": "x", "dimensions": 8}),
        ("/v1/embeddings", {"input": "x", "normalize": True}),
        ("/v1/embeddings", {"input": "x", "dimensions": 129}),
        ("/v1/embeddings", {"input": []}),
        ("/v1/embeddings", {"input": [10 ** 9]}),
        ("/v1/embeddings", {"input": "x", "truncate_prompt_tokens": 10 ** 6}),
        ("/v1/embeddings", {}),
        ("/score", {"queries": ["a", "b"], "documents": ["c", "d", "e"]}),
        ("/classify", {"input": "x"}),
        ("/v1/completions", {"prompt": "x", "max_tokens": 2}),
    ],
    "classify": [
        ("/pooling", {"input": "x", "task": "token_classify"}),
        ("/pooling", {"input": "x", "task": "embed"}),
        ("/classify", {"input": "x", "normalize": False}),
        ("/classify", {"input": []}),
        ("/score", {"queries": [], "documents": ["c"]}),
        ("/score", {"queries": ["a", "b"], "documents": ["c", "d", "e"]}),
        ("/rerank", {"query": "q", "documents": ["c"], "top_n": -1}),
        ("/rerank", {"documents": ["c"]}),
        ("/v1/embeddings", {"input": "x"}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}),
    ],
}


#: The engine computes in bfloat16, and a request's numbers depend on which requests share its
#: step: vLLM's own frontend answered ``/rerank`` (3 documents) with 0.6064179 or 0.6065448 for
#: the same document over 8 identical calls, and so did greenfront. Wrong answers (another
#: document, another pooling, a missing activation) differ by far more.
TOLERANCE = 1e-3


def _close(a, b, where: str = "") -> None:
    """Equal JSON, numbers to ``TOLERANCE``; ids and timestamps are not compared."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert list(a) == list(b), where
        for key in a:
            if key not in ("id", "created"):
                _close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, abs_tol=TOLERANCE), (where, a, b)
    else:
        assert a == b, (where, a, b)


def _both(stacks, path: str, body: dict):
    _, ours, theirs = stacks
    return [requests.post(s.url + path, json={"model": "tiny", **body}, timeout=120)
            for s in (ours, theirs)]


def test_good_requests_answer_as_vllm(stacks):
    kind = stacks[0]
    for path, body in GOOD[kind]:
        mine, vllm = _both(stacks, path, body)
        assert (mine.status_code, path) == (vllm.status_code, path), (mine.text, vllm.text)
        if body.get("encoding_format") == "base64":
            # base64 of float32: the bytes may differ in the last bit only; compare decoded.
            import base64
            import struct
            decode = lambda t: struct.unpack(f"<{len(base64.b64decode(t)) // 4}f",  # noqa: E731
                                             base64.b64decode(t))
            _close([decode(d["embedding"]) for d in mine.json()["data"]],
                   [decode(d["embedding"]) for d in vllm.json()["data"]], path)
            continue
        _close(mine.json(), vllm.json(), path)


def test_bad_requests_answer_as_vllm(stacks):
    kind = stacks[0]
    for path, body in BAD[kind]:
        mine, vllm = _both(stacks, path, body)
        assert mine.status_code == vllm.status_code, (path, body, mine.text, vllm.text)
        ours, theirs = mine.json(), vllm.json()
        if theirs.get("error", {}).get("type") == "Bad Request":
            # A body no form of vLLM's request union accepts lists every member's errors;
            # greenfront lists its own form's (docs/pooling.md §2): same status, type, param.
            ours, theirs = ({k: v for k, v in e["error"].items() if k != "message"}
                            for e in (ours, theirs))
        assert _tasks_sorted(ours) == _tasks_sorted(theirs), (path, body)


def _tasks_sorted(answer: dict) -> dict:
    """vLLM lists the supported tasks in a set's order (random per process); greenfront sorted."""
    message = answer.get("error", {}).get("message")
    if not message or "Supported tasks: [" not in message:
        return answer
    head, rest = message.split("Supported tasks: [", 1)
    names, tail = rest.split("]", 1)
    listed = sorted(n.strip() for n in names.split(","))
    return {"error": {**answer["error"], "message": f"{head}Supported tasks: {listed}{tail}"}}


def test_a_generation_request_leaves_the_engine_serving(stacks):
    _, ours, _ = stacks
    for path, body in [("/v1/completions", {"prompt": "x", "max_tokens": 2}),
                       ("/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2})]:
        r = requests.post(ours.url + path, json={"model": "tiny", **body}, timeout=60)
        assert r.status_code == 404 and r.json() == {"detail": "Not Found"}
    ok = requests.post(ours.url + "/pooling", json={"model": "tiny", "input": "still here"},
                       timeout=60)
    assert ok.status_code == 200, ok.text
    assert requests.get(ours.url + "/health", timeout=10).status_code == 200
