"""POST /inference/v1/generate (Falcon resource; the work is in convert/render).

Runs on: a request-pool thread.
"""
from __future__ import annotations

from resources.common.fields import fields_schema
from resources.generate import types
from resources.generate.convert import prepare_generate
from resources.generate.render import (GenerateState, GenerateStreamRenderer,
                                       render_generate_response)
from resources.generate_resource import GenerationResource


class GenerateResource(GenerationResource):
    """Generate from token ids (vLLM's token-in/token-out endpoint)."""

    prepare = staticmethod(prepare_generate)
    stream_renderer = GenerateStreamRenderer
    render_response = staticmethod(render_generate_response)
    output_state = GenerateState
    openai_headers = False

    def request_schemas(self) -> dict[str, dict]:
        schema = fields_schema(types.HEAD + types.TAIL, "GenerateRequest")
        schema["properties"]["sampling_params"] = fields_schema(types.SAMPLING, "SamplingParams")
        schema["required"] = [*schema.get("required", []), "sampling_params"]  # validate.py's
        return {"GenerateRequest": schema}
