"""The shared shape of the pooling endpoints' Falcon resources (docs/pooling.md §2).

parse and prepare (validate, tokenize every input) → one engine request per input, gathered →
one deferred JSON body that the offload driver resolves in the HTTP hub once every engine request
finished; a client that leaves, or one failing input, aborts the others.

Runs on: a request-pool thread (the HTTP hub with GREENFRONT_OFFLOAD=0).
"""
from __future__ import annotations

import time
from typing import Any

import falcon

from resources.common.fields import fields_schema
from resources.generate_resource import _dp_rank
from resources.pooled.output import PooledState
from resources.request_body import read_json
from runtime.cancellation import CANCEL_KEY, Cancellation
from runtime.serving_context import ServingContext
from runtime.state import WorkerState
from streaming.body import DeferredBody
from streaming.prepared import PooledRequest
from streaming.submit import ClientGone, start_generation


class PooledResource:
    """Base of the pooling endpoints; subclasses implement ``prepare`` and ``render``."""

    #: OpenAPI component name → field table (``request_schemas``).
    schemas: dict[str, list] = {}

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def prepare(self, body: Any, ctx: ServingContext, model_config: dict[str, Any],
                header_request_id: str | None) -> PooledRequest:
        raise NotImplementedError

    def render(self, prepared: PooledRequest, out: PooledState, created: int) -> bytes:
        raise NotImplementedError

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        state = self._state
        ctx = state.serving_context()
        model = state.model.config if state.model is not None else {}
        prepared = self.prepare(read_json(req), ctx, model, req.get_header("X-Request-Id"))
        created = int(time.time())
        cancel = req.env.get(CANCEL_KEY) or Cancellation()
        try:
            generation = start_generation(prepared, state.client, cancel,
                                          data_parallel_rank=_dp_rank(req))
        except ClientGone:
            resp.status = 499
            resp.data = b""
            return
        out = PooledState([len(item.prompt_token_ids) for item in prepared.choices])
        resp.content_type = falcon.MEDIA_JSON
        resp.stream = DeferredBody(generation, out,
                                   lambda st: self.render(prepared, st, created))

    def request_schemas(self) -> dict[str, dict]:
        return {name: fields_schema(table, name) for name, table in self.schemas.items()}
