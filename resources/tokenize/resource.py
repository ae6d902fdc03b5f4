"""POST /tokenize and /detokenize (vLLM's tokenizer routes).

Runs on: a request-pool thread (tokenizing a multi-megabyte prompt must not stall the hub).
"""
from __future__ import annotations

import falcon

from resources.common.fields import fields_schema
from resources.request_body import read_json
from resources.tokenize import types
from resources.tokenize.convert import detokenize, tokenize
from runtime.state import WorkerState


class TokenizeResource:
    """Tokenize a prompt or a chat conversation."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        ctx = self._state.serving_context()
        resp.content_type = falcon.MEDIA_JSON
        resp.data = tokenize(read_json(req), ctx)

    def request_schemas(self) -> dict[str, dict]:
        return {"TokenizeCompletionRequest": fields_schema(types.COMPLETION_FIELDS,
                                                           "TokenizeCompletionRequest"),
                "TokenizeChatRequest": fields_schema(types.CHAT_FIELDS, "TokenizeChatRequest")}


class DetokenizeResource:
    """Turn token ids back into text."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        ctx = self._state.serving_context()
        resp.content_type = falcon.MEDIA_JSON
        resp.data = detokenize(read_json(req), ctx)

    def request_schemas(self) -> dict[str, dict]:
        return {"DetokenizeRequest": fields_schema(types.DETOKENIZE_FIELDS, "DetokenizeRequest")}
