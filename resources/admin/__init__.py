"""Admin plumbing over engine UTILITY calls, as vLLM's frontends expose it.

Owns ``register_admin_routes``, the one entry point ``app.py`` calls: the routes exist only when
their gate is on, so a disabled route is the same 404 as any unknown path.

- ``dev``: ``VLLM_SERVER_DEV_MODE=1`` → /reset_*_cache, /sleep, /wake_up, /is_sleeping, /pause,
  /resume, /is_paused, /collective_rpc, weight-version routes, /get_world_size, /server_info.
- ``lora``: ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=1`` → /v1/load_lora_adapter,
  /v1/unload_lora_adapter, over the deployment's ``runtime.lora_registry.LoraRegistry``.
- ``engines``: fan-out of utility calls over the engine ranks, query-parameter parsing.

Runs on: import time in each worker (registration); the routes run in the HTTP hub.
"""
from __future__ import annotations

import logging

import falcon

from base.config import Config
from resources.admin import dev, lora
from runtime.lora_registry import LoraAdapter, LoraRegistry, adapter_lookup, lora_registry
from runtime.state import WorkerState

__all__ = ["LoraAdapter", "LoraRegistry", "adapter_lookup", "lora_registry",
           "register_admin_routes"]

log = logging.getLogger("greenfront.admin")


def register_admin_routes(app: falcon.App, state: WorkerState, config: Config) -> None:
    """Add the gated admin routes that ``config`` enables (none by default)."""
    if config.server_dev_mode:
        log.warning("SECURITY WARNING: Development endpoints are enabled! "
                    "This should NOT be used in production!")
        dev.register(app, state)
    if config.allow_runtime_lora_updating:
        log.warning("LoRA dynamic loading & unloading is enabled in the API server. "
                    "This should ONLY be used for local development!")
        lora.register(app, state, config)
