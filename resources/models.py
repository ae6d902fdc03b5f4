"""GET /v1/models: the served model names, in vLLM's shape.

Runs on: the HTTP hub.
"""
from __future__ import annotations

import secrets

import falcon

from base import jsonio
from runtime.lora_registry import lora_registry, uses_adapters
from runtime.state import WorkerState


class ModelsResource:
    """List the served models."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        state = self._state
        state.client.check_available()
        created = int(state.started_at)
        cards = [(name, state.config.model, None) for name in state.config.model_names]
        if uses_adapters(state.config):
            base = state.config.model_names[0]
            cards += [(a["id"], a["root"], a["parent"] or base)
                      for a in lora_registry(state.config).models()]
        data = [{
            "id": name,
            "object": "model",
            "created": created,
            "owned_by": "vllm",
            "root": root,
            "parent": parent,
            "max_model_len": state.client.max_model_len,
            "permission": [{
                "id": f"modelperm-{secrets.token_hex(8)}",
                "object": "model_permission",
                "created": created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }],
        } for name, root, parent in cards]
        resp.content_type = falcon.MEDIA_JSON
        resp.data = jsonio.dumps({"object": "list", "data": data})
