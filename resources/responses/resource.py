"""POST /v1/responses (Falcon resource; the work is in convert/render/events).

Runs on: a request-pool thread.
"""
from __future__ import annotations

from resources.generate_resource import GenerationResource
from resources.responses.convert import prepare_responses
from resources.responses.events import ResponsesStreamRenderer
from resources.responses.render import render_responses_response


class ResponsesResource(GenerationResource):
    """Create a model response."""

    prepare = staticmethod(prepare_responses)
    stream_renderer = ResponsesStreamRenderer
    render_response = staticmethod(render_responses_response)
