"""POST /v1/embeddings: one embedding per input (docs/pooling.md §2).

``dimensions`` needs a Matryoshka model (config.json ``is_matryoshka`` or
``matryoshka_dimensions``) and a size in [1, hidden size]: the engine truncates and normalizes
again. ``use_activation`` false returns the raw pooled hidden state.

Runs on: a request-pool thread (``prepare``), the HTTP hub (``render``).
"""
from __future__ import annotations

from typing import Any

from base.errors import InvalidRequest
from base.jsonio import dumps
from resources.pooled import types
from resources.pooled.convert import PooledRequest, build, parse_body, pooling_params
from resources.pooled.output import PooledState, check_encoding, encode
from resources.pooled.resource import PooledResource
from runtime.serving_context import ServingContext

COMPLETION = types.table(types.BASIC, types.COMPLETION, types.ENCODING, types.EMBED)
CHAT = types.table(types.BASIC, types.CHAT, types.ENCODING, types.EMBED)


def check_dimensions(dimensions: int | None, ctx: ServingContext,
                     config: dict[str, Any]) -> None:
    """vLLM's ``PoolingParams`` checks of ``dimensions`` for an embedding model."""
    if dimensions is None:
        return
    name = ctx.model_name
    size = config.get("hidden_size")
    allowed = config.get("matryoshka_dimensions")
    if not (config.get("is_matryoshka") or allowed):
        raise InvalidRequest(f"Model {name!r} does not support Matryoshka embeddings; "
                             f"dimensions must be unset (received dimensions={dimensions}).")
    if size is not None and not 1 <= dimensions <= size:
        raise InvalidRequest(f"Model {name!r} only supports dimensions in range [1, {size}], "
                             f"got {dimensions}.")
    if allowed is not None and dimensions not in allowed:
        raise InvalidRequest(f"Model {name!r} only supports Matryoshka dimensions {allowed}, "
                             f"got {dimensions}.")


class EmbeddingsResource(PooledResource):
    """Create embeddings (OpenAI's embeddings API)."""

    schemas = {"EmbeddingCompletionRequest": COMPLETION, "EmbeddingChatRequest": CHAT}

    def prepare(self, body: Any, ctx: ServingContext, model_config: dict[str, Any],
                header_request_id: str | None) -> PooledRequest:
        f, is_chat = parse_body(body, COMPLETION, CHAT)
        check_encoding(f)
        check_dimensions(f["dimensions"], ctx, model_config)
        params = pooling_params("embed", f["use_activation"], f["dimensions"])
        return build(f, ctx, is_chat, "embd", header_request_id, params)

    def render(self, prepared: PooledRequest, out: PooledState, created: int) -> bytes:
        f = prepared.fields
        return dumps({"id": prepared.request_id, "object": "list", "created": created,
                      "model": prepared.model,
                      "data": [{"index": i, "object": "embedding", "embedding": encode(v, f)}
                               for i, v in enumerate(out.vectors)],
                      "usage": out.usage()})
