"""POST /v1/completions (Falcon resource; the work is in convert/render).

Runs on: a request-pool thread.
"""
from __future__ import annotations

from resources.common.fields import fields_schema
from resources.completions import types
from resources.completions.convert import prepare_completion
from resources.completions.render import CompletionStreamRenderer, render_completion_response
from resources.generate_resource import GenerationResource


class CompletionsResource(GenerationResource):
    """Create a completion (OpenAI's legacy completions API)."""

    sse_keep_alive = True
    prepare = staticmethod(prepare_completion)
    stream_renderer = CompletionStreamRenderer
    render_response = staticmethod(render_completion_response)

    def request_schemas(self) -> dict[str, dict]:
        return {"CompletionRequest": fields_schema(
            types.fields(self._state.config.max_stop_strings), "CompletionRequest")}
