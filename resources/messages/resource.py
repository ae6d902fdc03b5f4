"""POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API; the work is in
prepare/render/events).

Errors after the Anthropic fields were parsed are the handler's and answer in Anthropic's
envelope (``{"type": "error", "error": {"type", "message"}}``), also when the engine fails a
non-streamed request; a failure after a stream began is an ``error`` event.

Runs on: a request-pool thread.
"""
from __future__ import annotations

from typing import Any

import falcon

from base.errors import ApiError, in_envelope
from resources.common.fields import fields_schema
from resources.generate_resource import GenerationResource
from resources.messages import types
from resources.messages.events import MessagesStreamRenderer, error_event
from resources.messages.prepare import count_tokens, prepare_messages
from resources.messages.render import render_messages_response
from resources.request_body import read_json
from runtime.state import WorkerState

class MessagesResource(GenerationResource):
    """Create a message (Anthropic's Messages API)."""

    prepare = staticmethod(prepare_messages)
    stream_renderer = MessagesStreamRenderer
    render_response = staticmethod(render_messages_response)
    error_envelope = "anthropic"
    stream_error_event = staticmethod(error_event)

    def prepare_request(self, body: Any, ctx: Any, req: falcon.Request) -> Any:
        return prepare_messages(body, ctx, header_request_id=req.get_header("X-Request-Id"),
                                disabled_effort=self._state.config.anthropic_disabled_thinking_effort)

    def request_schemas(self) -> dict[str, dict]:
        return {"AnthropicMessagesRequest": fields_schema(
            types.fields(self._state.config.max_stop_strings), "AnthropicMessagesRequest")}


class CountTokensResource:
    """Count a Messages request's prompt tokens."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        ctx = self._state.serving_context()
        body = read_json(req)
        try:
            resp.data = count_tokens(body, ctx,
                                     self._state.config.anthropic_disabled_thinking_effort)
        except ApiError as exc:
            raise in_envelope(exc, "anthropic")
        resp.content_type = falcon.MEDIA_JSON

    def request_schemas(self) -> dict[str, dict]:
        return {"AnthropicCountTokensRequest": fields_schema(types.COUNT_FIELDS,
                                                             "AnthropicCountTokensRequest")}
