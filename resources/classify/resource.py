"""POST /classify: one classification per input (docs/pooling.md §2).

``probs`` is the engine's output (probabilities: the engine applies the activation unless
``use_activation`` is false), ``label`` the model's name of the largest one (config.json
``id2label``, else transformers' ``LABEL_<i>``).

Runs on: a request-pool thread (``prepare``), the HTTP hub (``render``).
"""
from __future__ import annotations

from typing import Any

from base.jsonio import dumps
from resources.pooled import types
from resources.pooled.convert import build, parse_body, pooling_params
from resources.pooled.output import PooledState
from resources.pooled.resource import PooledResource
from runtime.served_tasks import num_labels
from runtime.serving_context import ServingContext
from streaming.prepared import PooledRequest

ACTIVATION = [("use_activation", types.EMBED[1][1], None)]
COMPLETION = types.table(types.BASIC, types.COMPLETION, ACTIVATION)
CHAT = types.table(types.BASIC, types.CHAT, ACTIVATION)


def labels(config: dict[str, Any]) -> dict[int, str]:
    """The model's label names by index."""
    given = config.get("id2label")
    if isinstance(given, dict) and given:
        return {int(k): str(v) for k, v in given.items()}
    return {i: f"LABEL_{i}" for i in range(num_labels(config))}


class ClassifyResource(PooledResource):
    """Classify inputs (vLLM's /classify)."""

    schemas = {"ClassificationCompletionRequest": COMPLETION,
               "ClassificationChatRequest": CHAT}

    def prepare(self, body: Any, ctx: ServingContext, model_config: dict[str, Any],
                header_request_id: str | None) -> PooledRequest:
        f, is_chat = parse_body(body, COMPLETION, CHAT)
        prepared = build(f, ctx, is_chat, "classify", header_request_id,
                         pooling_params("classify", f["use_activation"]))
        prepared.extra["labels"] = labels(model_config)
        return prepared

    def render(self, prepared: PooledRequest, out: PooledState, created: int) -> bytes:
        names = prepared.extra["labels"]
        data = []
        for i, probs in enumerate(out.vectors):
            best = max(range(len(probs)), key=probs.__getitem__) if probs else 0
            data.append({"index": i, "label": names.get(best), "probs": probs,
                         "num_classes": len(probs)})
        return dumps({"id": prepared.request_id, "object": "list", "created": created,
                      "model": prepared.model, "data": data, "usage": out.usage()})
