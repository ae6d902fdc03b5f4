"""The pooling wire against real vLLM 0.32 frames (``tests/compat/pooling-fixtures``): the
PoolingParams greenfront builds encode to the bytes vLLM's frontend sent, and the outputs the
real engine sent decode, through greenfront's output state and encoder, to the vectors vLLM's
frontend answered."""
from __future__ import annotations

import json
import os

import pytest

from engine.protocol import RequestType, decode_outputs, decode_request, encode_add
from resources.pooled.convert import pooling_params
from resources.pooled.output import PooledState, encode

HERE = os.path.join(os.path.dirname(__file__), "..", "..", "compat", "pooling-fixtures")


def _lines(name: str) -> list[dict]:
    with open(os.path.join(HERE, name)) as f:
        return [json.loads(line) for line in f]


def _adds(kind: str) -> list:
    adds = []
    for m in _lines(f"wire-{kind}.jsonl"):
        frames = [bytes.fromhex(h) for h in m["frames"]]
        if m["socket"] == "input" and m["direction"] == "frontend->engine" \
                and frames[1] == RequestType.ADD:
            adds.append((frames, decode_request(frames[1:])[1]))
    return adds


def _outputs(kind: str) -> dict[str, tuple]:
    found = {}
    for m in _lines(f"wire-{kind}.jsonl"):
        if m["socket"] == "output":
            frames = [bytes.fromhex(h) for h in m["frames"]]
            outs = decode_outputs(frames)
            for out in (outs.outputs if outs is not None else ()):
                found[out.request_id] = (out, frames)
    return found


@pytest.mark.parametrize("kind", ["embed", "rerank"])
def test_adds_carry_the_pooling_params_greenfront_builds(kind):
    adds = _adds(kind)
    assert adds
    for frames, request in adds:
        sent = request.pooling_params
        ours = pooling_params(sent.task, sent.use_activation, sent.dimensions)
        assert ours == sent
        assert request.sampling_params is None
        assert request.external_req_id == request.request_id.rsplit("-", 1)[0]
        assert encode_add(frames[0], request)[2] == frames[2]  # byte for byte


def test_outputs_decode_to_the_vectors_vllm_answered():
    outputs = _outputs("embed")
    checked = 0
    for case in _lines("http-embed.jsonl"):
        if case["path"] != "/v1/embeddings" or case["status"] != 200:
            continue
        prefix = f"embd-fx-{case['label']}-"
        mine = sorted((rid, o) for rid, o in outputs.items() if rid.startswith(prefix))
        state = PooledState([out.prefill_stats.num_prompt_tokens for _, (out, _f) in mine])
        for index, (_, (out, frames)) in enumerate(mine):
            state.add(index, out, frames)
        assert state.all_finished
        fields = {"encoding_format": case["request"].get("encoding_format", "float"),
                  "embed_dtype": "float32", "endianness": "native"}
        answered = [d["embedding"] for d in case["response"]["data"]]
        assert [encode(v, fields) for v in state.vectors] == answered, case["label"]
        assert state.usage() == case["response"]["usage"]
        checked += 1
    assert checked >= 7


def test_inline_and_aux_frame_arrays_both_decode():
    outputs = _outputs("embed")
    inline = [o for o, _ in outputs.values() if not isinstance(o.pooling_output[2], int)]
    aux = [o for o, _ in outputs.values() if isinstance(o.pooling_output[2], int)]
    assert inline and aux  # dimensions 8 travels inline, 128 floats in an aux frame
    rerank = _outputs("rerank")
    assert all(o.pooling_output[1] == [1] for o, _ in rerank.values())


def _gathered(kind: str, prefix: str) -> PooledState:
    """The outputs of the engine requests whose ids start with ``prefix``, in index order."""
    found = sorted(((int(rid[len(prefix):].split("-")[0]), out, frames)
                    for rid, (out, frames) in _outputs(kind).items() if rid.startswith(prefix)))
    state = PooledState([out.prefill_stats.num_prompt_tokens for _, out, _f in found])
    for index, out, frames in found:
        state.add(index, out, frames)
    return state


@pytest.mark.parametrize("kind, label, score_type, queries", [
    ("embed", "score-bi", "bi-encoder", 1),
    ("rerank", "score-cross-1n", "cross-encoder", 1),
    ("rerank", "score-cross-11", "cross-encoder", 1),
])
def test_scores_from_real_outputs_equal_vllms(kind, label, score_type, queries):
    from streaming.prepared import PooledRequest
    from resources.score.convert import scores
    case = next(c for c in _lines(f"http-{kind}.jsonl") if c["request"]["request_id"] == f"fx-{label}")
    state = _gathered(kind, f"score-fx-{label}-")
    prepared = PooledRequest("x", "tiny", [], {}, extra={"score_type": score_type,
                                                        "queries": queries})
    answered = [d["score"] for d in case["response"]["data"]]
    assert scores(prepared, state) == pytest.approx(answered, abs=1e-6)
    assert state.usage()["prompt_tokens"] == case["response"]["usage"]["prompt_tokens"]
