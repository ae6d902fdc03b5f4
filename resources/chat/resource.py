"""POST /v1/chat/completions (Falcon resource; the work is in convert/render).

Runs on: a request-pool thread.
"""
from __future__ import annotations

from resources.chat import types
from resources.chat.convert import prepare_chat
from resources.chat.render import ChatStreamRenderer, render_chat_response
from resources.common.fields import fields_schema
from resources.generate_resource import GenerationResource


class ChatCompletionsResource(GenerationResource):
    """Create a chat completion."""

    sse_keep_alive = True
    prepare = staticmethod(prepare_chat)
    stream_renderer = ChatStreamRenderer
    render_response = staticmethod(render_chat_response)

    def request_schemas(self) -> dict[str, dict]:
        return {"ChatCompletionRequest": fields_schema(
            types.fields(self._state.config.max_stop_strings), "ChatCompletionRequest")}
