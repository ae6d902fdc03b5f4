"""Runtime LoRA adapters: /v1/load_lora_adapter and /v1/unload_lora_adapter.

Behind ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``. The loaded adapters are kept in the deployment's
``runtime.lora_registry.LoraRegistry``.

Load (vLLM 0.32's ``OpenAIServingModels.load_lora_adapter``, plus vllm-rs's engine checks):
1. body ``{"lora_name", "lora_path", "load_inplace"=false, "is_3d_lora_weight"=false}``
   (application/json; field errors are the usual 400 "Bad Request");
2. 400 ``InvalidUserInput`` for an empty name/path, a name that is a served model name, or a
   name already loaded without ``load_inplace`` (vLLM's messages);
3. 400 when an engine registered ``supports_lora: false`` (the engine would refuse anyway);
4. with ``VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES`` set, a local path (absolute, ``.``/``~``
   relative, or existing on disk) must be absolute and resolve under one of the prefixes (400);
   unset, any path goes, as in vLLM's Python frontend (vllm-rs refuses local paths then);
5. utility ``add_lora [[name, id, path, nil, load_inplace, is_3d]]`` on every rank; ids are 1, 2,
   … in load order and kept by an in-place reload; an engine failure naming the adapter as not
   found is vLLM's 404, any other a 500 with the engine's message; ranks that did load a new
   adapter get ``remove_lora`` back so that no engine keeps a half-loaded one;
6. 200 ``Success: LoRA adapter '<name>' added successfully.`` (plain text).

Unload: ``{"lora_name", "lora_int_id"?}`` (the id is ignored, as vLLM does); 404
``NotFoundError`` for an unknown name; utility ``remove_lora [id]`` on every rank (vLLM 0.32's
Python frontend only forgets the name; vllm-rs also frees the engine slot, which we follow);
200 ``Success: LoRA adapter '<name>' removed successfully.``

Runs on: the HTTP hub.
"""
from __future__ import annotations

import logging
import os
from typing import Any

import falcon
import gevent

from base.config import Config
from base.errors import EngineUnavailable, NotFound, ServerError
from resources.admin.engines import NO_TIMEOUT, call_each, engine_client
from resources.common.fields import (
    MISSING,
    fields_schema,
    parse_fields,
    require_object,
    v_bool,
    v_int,
    v_nullable,
    v_str,
)
from resources.request_body import read_json
from runtime.lora_registry import InvalidUserInput, LoraAdapter, LoraRegistry, lora_registry
from runtime.state import WorkerState

log = logging.getLogger("greenfront.lora")

PREFIXES_ENV = "VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES"

LOAD_FIELDS = [
    ("lora_name", v_str(), MISSING),
    ("lora_path", v_str(), MISSING),
    ("load_inplace", v_bool(), False),
    ("is_3d_lora_weight", v_bool(), False),
]
UNLOAD_FIELDS = [
    ("lora_name", v_str(), MISSING),
    ("lora_int_id", v_nullable(v_int()), None),
]



# -- checks -------------------------------------------------------------------------------------
def _is_local(path: str) -> bool:
    """A filesystem path rather than a Hugging Face repo id (which the engine downloads)."""
    return (os.path.isabs(path) or path.startswith((".", "~")) or os.path.exists(path))


def check_path(path: str, prefixes: tuple[str, ...]) -> None:
    """400 unless a local ``path`` is absolute and, symlinks resolved, inside a prefix."""
    if not prefixes or not _is_local(path):
        return
    if os.path.isabs(path):
        real = os.path.realpath(path)
        for prefix in prefixes:
            root = os.path.realpath(prefix)
            if os.path.commonpath([real, root]) == root:
                return
    raise InvalidUserInput(
        "Local LoRA adapter paths must be absolute and under one of the prefixes configured by "
        f"{PREFIXES_ENV}.")


def _check_lora_support(client: Any) -> None:
    disabled = [rank for rank in client.ranks
                if not getattr(client.registrations.get(rank), "supports_lora", False)]
    if disabled:
        raise InvalidUserInput(
            "LoRA adapters cannot be loaded: the engine was started without LoRA support "
            f"(supports_lora=false on engine rank {disabled[0]}); start vLLM with --enable-lora.")


def load_adapter(state: WorkerState, registry: LoraRegistry, name: str, path: str,
                 load_inplace: bool = False, is_3d: bool = False,
                 base_model_name: str | None = None) -> None:
    """HTTP hub: load adapter ``name`` into every engine and list it in the registry.

    Raises:
        ApiError: the engines cannot take adapters, or one refused this one (a new adapter is
            then removed from the ranks that took it).
    """
    client = engine_client(state)
    _check_lora_support(client)
    adapter, previous = registry.begin_load(name, path, load_inplace, is_3d, base_model_name)
    ok = False
    try:
        results = call_each(client, "add_lora", [adapter.request()], timeout=NO_TIMEOUT)
        failed = [(rank, exc) for rank, good, exc in results if not good]
        if failed and previous is None:
            # Don't leave a new adapter on the ranks that took it: nobody could name it.
            loaded = [rank for rank, good, _ in results if good]
            if loaded:
                call_each(client, "remove_lora", [adapter.int_id], ranks=loaded)
        if failed:
            raise _load_error(adapter, failed[0][1].message)
        ok = True
    finally:
        registry.end_load(adapter, previous, ok)
    log.info("loaded LoRA adapter %r (id %d) from %r", name, adapter.int_id, path)


def unload_adapter(state: WorkerState, registry: LoraRegistry, name: str) -> LoraAdapter:
    """HTTP hub: remove adapter ``name`` from every engine and from the registry.

    Raises:
        ApiError: not loaded (404), or an engine failed the removal (500).
    """
    client = engine_client(state)
    adapter = registry.begin_unload(name)
    ok = False
    try:
        results = call_each(client, "remove_lora", [adapter.int_id])
        failed = [exc for _rank, good, exc in results if not good]
        if failed:
            raise ServerError(failed[0].message)
        # A false result means that engine no longer held it (evicted): the goal is met.
        ok = True
    finally:
        registry.end_unload(adapter, ok)
    log.info("unloaded LoRA adapter %r (id %d)", name, adapter.int_id)
    return adapter


def load_static_modules(state: WorkerState, registry: LoraRegistry) -> None:
    """HTTP hub, once the engines registered: ``--lora-modules``, loaded by worker slot 0 (the
    registry shares them with the other workers); one already listed is not loaded again (a
    restarted worker). A module that fails to load stops the server, as vLLM fails its start."""
    if state.config.worker_slot != 0:
        _wait_for_static_modules(state, registry)
        return
    listed = {a.name: a.path for a in registry.adapters()}
    for name, path, base, is_3d in state.config.lora_modules:
        if listed.get(name) == path:
            continue
        try:
            load_adapter(state, registry, name, path, is_3d=is_3d, base_model_name=base)
        except Exception as exc:
            reason = f"--lora-modules {name}={path} did not load: {getattr(exc, 'message', exc)}"
            log.error("stopping: %s", reason)
            state.halt(EngineUnavailable(f"The server is stopping: {reason}."))
            return


def _wait_for_static_modules(state: WorkerState, registry: LoraRegistry) -> None:
    """The other workers: until slot 0 listed every module (their start waits for this, as
    vLLM serves only once they are loaded; a module that fails halts the server anyway)."""
    names = {module[0] for module in state.config.lora_modules}
    while not names <= {a.name for a in registry.adapters()}:
        gevent.sleep(0.2)


# -- resources ----------------------------------------------------------------------------------
class LoadLoraAdapterResource:
    """Load a LoRA adapter into every engine."""

    media_type = "text/plain"

    def __init__(self, state: WorkerState, registry: LoraRegistry) -> None:
        self._state = state
        self._registry = registry

    def request_schemas(self) -> dict[str, dict]:
        return {"LoadLoRAAdapterRequest": fields_schema(LOAD_FIELDS, "LoadLoRAAdapterRequest")}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = parse_fields(require_object(read_json(req)), LOAD_FIELDS)
        name, path = body["lora_name"], body["lora_path"]
        if not name or not path:
            raise InvalidUserInput("Both 'lora_name' and 'lora_path' must be provided.")
        if name in self._state.config.model_names:
            raise InvalidUserInput(
                f"The lora adapter '{name}' conflicts with a served base model.")
        check_path(path, self._state.config.runtime_lora_allowed_path_prefixes)
        load_adapter(self._state, self._registry, name, path, body["load_inplace"],
                     body["is_3d_lora_weight"])
        resp.status = falcon.HTTP_200
        resp.content_type = falcon.MEDIA_TEXT
        resp.text = f"Success: LoRA adapter '{name}' added successfully."


def _load_error(adapter: LoraAdapter, message: str) -> Exception:
    not_found = f"Loading lora {adapter.name} failed: No adapter found for {adapter.path}"
    if not_found in message:
        return NotFound(not_found)
    return ServerError(message)


class UnloadLoraAdapterResource:
    """Unload a LoRA adapter from every engine."""

    media_type = "text/plain"

    def __init__(self, state: WorkerState, registry: LoraRegistry) -> None:
        self._state = state
        self._registry = registry

    def request_schemas(self) -> dict[str, dict]:
        return {"UnloadLoRAAdapterRequest": fields_schema(UNLOAD_FIELDS,
                                                          "UnloadLoRAAdapterRequest")}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = parse_fields(require_object(read_json(req)), UNLOAD_FIELDS)
        name = body["lora_name"]
        if not name:
            raise InvalidUserInput("'lora_name' needs to be provided to unload a LoRA adapter.")
        unload_adapter(self._state, self._registry, name)
        resp.status = falcon.HTTP_200
        resp.content_type = falcon.MEDIA_TEXT
        resp.text = f"Success: LoRA adapter '{name}' removed successfully."


def register(app: falcon.App, state: WorkerState, config: Config) -> None:
    """Add the LoRA routes (the caller checked ``config.allow_runtime_lora_updating``)."""
    registry = lora_registry(config)
    app.add_route("/v1/load_lora_adapter", LoadLoraAdapterResource(state, registry))
    app.add_route("/v1/unload_lora_adapter", UnloadLoraAdapterResource(state, registry))
