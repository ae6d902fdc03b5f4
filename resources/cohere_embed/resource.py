"""POST /v2/embed: Cohere's embed API v2 (texts only; docs/pooling.md §2).

``truncate`` END (default) keeps the first ``max_tokens`` (or the context length), START the
last, NONE none and refuses an input longer than ``max_tokens`` after embedding it, as vLLM 0.32
does. ``embedding_types`` float, base64 (little-endian float32), binary and ubinary (one bit per
dimension, 1 for a value >= 0, eight to a byte, most significant first; binary as signed bytes).

Runs on: a request-pool thread (``prepare``), the HTTP hub (``render``).
"""
from __future__ import annotations

import base64
import struct
from typing import Any

from base.errors import InvalidRequest
from base.jsonio import dumps
from resources.common.fields import (add_error, collect_fields, require_object, v_dict, v_int,
                                     v_list, v_literal, v_nullable, v_str, validation_error)
from resources.embeddings.resource import check_dimensions
from resources.pooled import types
from resources.pooled.convert import build, pooling_params
from resources.pooled.output import PooledState
from resources.pooled.resource import PooledResource
from runtime.serving_context import ServingContext
from streaming.prepared import PooledRequest

FIELDS = [
    ("model", v_nullable(v_str()), None),
    ("input_type", v_nullable(v_str()), None),
    ("texts", v_nullable(v_list(v_str())), None),
    ("images", v_nullable(v_list(v_str())), None),
    ("inputs", v_nullable(v_list(v_dict())), None),
    ("output_dimension", v_nullable(v_int()), None),
    ("embedding_types", v_nullable(v_list(v_literal("float", "binary", "ubinary", "base64"))),
     None),
    ("truncate", v_literal("NONE", "START", "END"), "END"),
    ("max_tokens", v_nullable(v_int()), None),
    ("priority", v_int(**types.INT64), 0),
]
_ONE_INPUT = ("Exactly one of texts, images, or inputs must be provided, and it must be "
              "non-empty")


def _parse(body: Any) -> dict[str, Any]:
    values, errors = collect_fields(require_object(body), FIELDS)
    if errors:
        raise validation_error(errors)
    given = [values[k] for k in ("texts", "images", "inputs") if values[k] is not None]
    if len(given) != 1 or not given[0]:
        add_error(errors, "value_error", (), f"Value error, {_ONE_INPUT}", body)
        raise validation_error(errors)
    if values["texts"] is None:
        raise InvalidRequest("greenfront does not implement image input on /v2/embed.",
                             param="images" if values["images"] is not None else "inputs")
    return values


def _pack_bits(vector: list[float], signed: bool) -> list[int]:
    out = []
    for start in range(0, len(vector), 8):
        byte = 0
        for value in vector[start:start + 8]:
            byte = (byte << 1) | (value >= 0)
        out.append(byte - 128 if signed else byte)
    return out


class CohereEmbedResource(PooledResource):
    """Embed texts (Cohere's v2 embed API)."""

    schemas = {"CohereEmbedRequest": FIELDS}

    def prepare(self, body: Any, ctx: ServingContext, model_config: dict[str, Any],
                header_request_id: str | None) -> PooledRequest:
        v = _parse(body)
        if v["input_type"] is not None:
            raise InvalidRequest(f"Unsupported input_type {v['input_type']!r}. This model does "
                                 "not define any input_type task instructions.")
        check_dimensions(v["output_dimension"], ctx, model_config)
        types_ = v["embedding_types"] or ["float"]
        size = v["output_dimension"] or model_config.get("hidden_size") or 0
        if {"binary", "ubinary"} & set(types_) and size % 8:
            raise InvalidRequest("Embedding dimension must be a multiple of 8 for binary "
                                 f"embedding types, but got {size}.")
        truncate, limit = v["truncate"], v["max_tokens"]
        f = {"model": v["model"], "request_id": None, "input": v["texts"],
             "add_special_tokens": True, "priority": v["priority"],
             "truncate_prompt_tokens": None if truncate == "NONE" else
             (limit if limit is not None else -1),
             "truncation_side": "left" if truncate == "START" else None}
        prepared = build(f, ctx, False, "embd", header_request_id,
                         pooling_params("embed", None, v["output_dimension"]))
        prepared.extra.update(texts=v["texts"], types=types_)
        if truncate == "NONE" and limit is not None:
            for item in prepared.choices:
                if len(item.prompt_token_ids) > limit:
                    raise InvalidRequest(
                        f"Input of {len(item.prompt_token_ids)} tokens exceeds max_tokens="
                        f"{limit} with truncate=NONE. Set truncate to END or START to allow "
                        "truncation.")
        return prepared

    def render(self, prepared: PooledRequest, out: PooledState, created: int) -> bytes:
        vectors = out.vectors
        embeddings: dict[str, Any] = {}
        for kind in ("float", "binary", "ubinary", "base64"):
            if kind not in prepared.extra["types"]:
                continue
            if kind == "float":
                embeddings[kind] = vectors
            elif kind == "base64":
                embeddings[kind] = [base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()
                                    for v in vectors]
            else:
                embeddings[kind] = [_pack_bits(v, kind == "binary") for v in vectors]
        return dumps({"id": prepared.request_id, "embeddings": embeddings,
                      "texts": prepared.extra["texts"],
                      "meta": {"api_version": {"version": "2"},
                               "billed_units": {"input_tokens": out.prompt_tokens,
                                                "image_tokens": 0}},
                      "response_type": "embeddings_by_type"})

