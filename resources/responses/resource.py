"""POST /v1/responses (Falcon resource; the work is in convert/render/events).

Runs on: a request-pool thread.
"""
from __future__ import annotations

from typing import Any

import falcon

from resources.generate_resource import GenerationResource
from resources.responses.convert import ResponsesPrepared, prepare_responses
from resources.responses.events import ResponsesStreamRenderer
from resources.responses.render import render_responses_response
from resources.responses.stored import history, saver
from runtime.response_store import store_for


class ResponsesResource(GenerationResource):
    """Create a model response."""

    prepare = staticmethod(prepare_responses)
    stream_renderer = ResponsesStreamRenderer
    render_response = staticmethod(render_responses_response)

    def prepare_request(self, body: Any, ctx: Any, req: falcon.Request) -> ResponsesPrepared:
        """With the store on: ``previous_response_id`` replayed from it, and the finished
        response saved to it unless the request says ``store: false`` (vLLM's default is to
        store)."""
        config = self._state.config
        store = store_for(config)
        prepared = prepare_responses(
            body, ctx, history=None if store is None else lambda rid: history(store, rid))
        if store is not None and body.get("store", True) is not False:
            prepared.save = saver(config, store, prepared.messages)
        return prepared
