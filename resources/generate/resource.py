"""POST /inference/v1/generate (Falcon resource; the work is in convert/render).

Runs on: a request-pool thread.
"""
from __future__ import annotations

from resources.generate.convert import prepare_generate
from resources.generate.render import (GenerateState, GenerateStreamRenderer,
                                       render_generate_response)
from resources.generate_resource import GenerationResource


class GenerateResource(GenerationResource):
    prepare = staticmethod(prepare_generate)
    stream_renderer = GenerateStreamRenderer
    render_response = staticmethod(render_generate_response)
    output_state = GenerateState
