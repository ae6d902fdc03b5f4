"""POST /score and /v1/score (scores of pairs), /rerank, /v1/rerank and /v2/rerank (documents
ordered by their score against one query) (docs/pooling.md §2).

Runs on: a request-pool thread (``prepare``), the HTTP hub (``render``).
"""
from __future__ import annotations

from typing import Any

from base.jsonio import dumps
from resources.pooled.output import PooledState
from resources.pooled.resource import PooledResource
from resources.score.convert import (RERANK, SCORE_TABLES, parse_rerank, parse_score,
                                     prepare_scoring, scores)
from runtime.served_tasks import served_tasks
from runtime.serving_context import ServingContext
from streaming.prepared import PooledRequest


class ScoreResource(PooledResource):
    """Score pairs of texts (vLLM's /score)."""

    schemas = {f"Score{a.title()}{b.title()}Request".replace("_", ""): table
               for (a, b), table in SCORE_TABLES.items()}
    parse = staticmethod(parse_score)

    def prepare(self, body: Any, ctx: ServingContext, model_config: dict[str, Any],
                header_request_id: str | None) -> PooledRequest:
        f, left, right = type(self).parse(body)
        kind = served_tasks(self._state.client.supported_tasks, model_config).score_type
        return prepare_scoring(f, left, right, kind or "bi-encoder", ctx, model_config,
                               header_request_id)

    def render(self, prepared: PooledRequest, out: PooledState, created: int) -> bytes:
        data = [{"index": i, "object": "score", "score": s}
                for i, s in enumerate(scores(prepared, out))]
        return dumps({"id": prepared.request_id, "object": "list", "created": created,
                      "model": prepared.model, "data": data, "usage": out.usage()})


class RerankResource(ScoreResource):
    """Rank documents by relevance to a query (vLLM's /rerank, Jina's and Cohere's shape)."""

    schemas = {"RerankRequest": RERANK}
    parse = staticmethod(parse_rerank)

    def render(self, prepared: PooledRequest, out: PooledState, created: int) -> bytes:
        documents = prepared.extra["documents"]
        results = [{"index": i, "document": {"text": documents[i], "multi_modal": None},
                    "relevance_score": s} for i, s in enumerate(scores(prepared, out))]
        results.sort(key=lambda r: r["relevance_score"], reverse=True)
        top_n = prepared.fields["top_n"] or len(results)
        if top_n < len(documents):
            results = results[:top_n]
        tokens = out.prompt_tokens
        return dumps({"id": prepared.request_id, "model": prepared.model,
                      "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                      "results": results})
