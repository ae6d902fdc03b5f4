"""Score and rerank requests -> engine requests, and their scores (docs/pooling.md §2).

Two kinds of model score pairs, as vLLM 0.32 does: an embedding model is a bi-encoder (one
engine request per query and per document, the frontend computes cosine similarity); a
classifier of one label is a cross-encoder (one engine request per pair, its prompt the query and
the document texts concatenated, which is vLLM's pair prompt for a model without a separator
token, e.g. an LLM reranker). Pairs are 1:1, 1:N or N:N.

Runs on: request pool threads (``prepare``), the HTTP hub (``scores``).
"""
from __future__ import annotations

import math
import struct
from typing import Any

from base.errors import InvalidRequest
from resources.common.fields import (MISSING, collect_fields, require_object, v_dict, v_int,
                                     v_list, v_nullable, v_str, v_union, validation_error)
from resources.pooled import types
from resources.pooled.convert import build, check_common, pooling_params
from resources.pooled.output import PooledState
from runtime.serving_context import ServingContext
from streaming.prepared import PooledRequest

SCORE_INPUT = v_union(v_str(), v_dict(), v_list(v_union(v_str(), v_dict())))
ACTIVATION = [("use_activation", types.EMBED[1][1], None)]
SCORING = types.table(types.BASIC, ACTIVATION, [
    ("max_tokens_per_query", v_int(), 0),
    ("max_tokens_per_doc", v_int(), 0),
    ("instruction", v_nullable(v_str()), None),
    ("chat_template_kwargs", v_nullable(v_dict()), None),
])
#: The score request's four spellings of its two sides, in vLLM's union order.
SCORE_FORMS = [("queries", "documents"), ("queries", "items"), ("data_1", "data_2"),
               ("text_1", "text_2")]
SCORE_TABLES = {pair: types.table(SCORING, [(pair[0], SCORE_INPUT, MISSING),
                                            (pair[1], SCORE_INPUT, MISSING)])
                for pair in SCORE_FORMS}
RERANK = types.table(SCORING, [("query", v_union(v_str(), v_dict()), MISSING),
                               ("documents", SCORE_INPUT, MISSING),
                               ("top_n", v_int(ge=0), 0)])


def parse_score(body: Any) -> tuple[dict[str, Any], list, list]:
    """The fields of the first of vLLM's score forms the body has, and its two sides."""
    body = require_object(body)
    first_errors = None
    for pair in SCORE_FORMS:
        values, errors = collect_fields(body, SCORE_TABLES[pair])
        if not errors:
            return values, _listed(values[pair[0]]), _listed(values[pair[1]])
        first_errors = first_errors or errors
    raise validation_error(first_errors)


def parse_rerank(body: Any) -> tuple[dict[str, Any], list, list]:
    values, errors = collect_fields(require_object(body), RERANK)
    if errors:
        raise validation_error(errors)
    return values, [values["query"]], _listed(values["documents"])


def _listed(side: Any) -> list:
    return side if isinstance(side, list) else [side]


def _check(f: dict[str, Any], left: list, right: list, ctx: ServingContext,
           config: dict[str, Any]) -> None:
    """vLLM's input checks, then what greenfront does not implement."""
    for item in left + right:
        if not isinstance(item, str):
            arch = (config.get("architectures") or ["this model"])[0]
            raise InvalidRequest(f"MultiModalParam is not supported for {arch}")
    if len(left) > 1 and len(left) != len(right):
        raise InvalidRequest("Input lengths must be either 1:1, 1:N or N:N")
    if not left:
        raise InvalidRequest("At least one text element must be given")
    if not right:
        raise InvalidRequest("At least one text_pair element must be given")
    for name in ("max_tokens_per_query", "max_tokens_per_doc"):
        value = f[name]
        if value < 0:
            raise InvalidRequest(f"{name} must be a non-negative integer")
        if value >= ctx.max_model_len:
            raise InvalidRequest(f"{name} ({value}) must be less than max_model_len "
                                 f"({ctx.max_model_len}).")
        if value:
            raise InvalidRequest(f"greenfront does not implement `{name}`.", param=name)
    for name in ("instruction", "chat_template_kwargs"):
        if f[name] is not None:
            raise InvalidRequest(f"greenfront does not implement `{name}` (score templates).",
                                 param=name)


def prepare_scoring(f: dict[str, Any], left: list[str], right: list[str], score_type: str,
                    ctx: ServingContext, config: dict[str, Any],
                    header_request_id: str | None) -> PooledRequest:
    """The engine requests of a score or rerank request (ids ``score-<id>-<i>``)."""
    _check(f, left, right, ctx, config)
    check_common(f, ctx)
    if score_type == "bi-encoder":
        texts = left + right
        params = pooling_params("embed", f["use_activation"])
    else:
        queries = left * len(right) if len(left) == 1 else left
        texts = [q + d for q, d in zip(queries, right)]
        params = pooling_params("classify", f["use_activation"])
    fields = {**f, "input": texts, "add_special_tokens": True}
    prepared = build(fields, ctx, False, "score", header_request_id, params)
    prepared.extra.update(score_type=score_type, queries=len(left), documents=right)
    return prepared


def scores(prepared: PooledRequest, out: PooledState) -> list[float]:
    """One score per pair: cosine similarity of the embeddings, or the classifier's output."""
    vectors = out.vectors
    if prepared.extra["score_type"] != "bi-encoder":
        return [v[0] for v in vectors]
    n = prepared.extra["queries"]
    left, right = vectors[:n], vectors[n:]
    if len(left) == 1:
        left = left * len(right)
    return [_cosine(a, b) for a, b in zip(left, right)]


def _cosine(a: list[float], b: list[float]) -> float:
    """torch's cosine_similarity (eps 1e-8), rounded to the float32 it computes in."""
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return struct.unpack("<f", struct.pack("<f", dot / max(norm, 1e-8)))[0]
