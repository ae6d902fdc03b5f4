"""``vllm.Control``: every RPC answered, as vLLM 0.32's Rust frontend answers it.

- Server and model facts come from the engines' registrations (rank order; the first engine's
  where one value is asked) and the configuration.
- ``Abort`` ends this worker's live calls with those request ids (``rpc.inference``); an unknown
  id is OK. A client's one channel carries its Control and Inference calls on one connection,
  so they reach the same worker.
- LoRA: the engines must support LoRA (else FAILED_PRECONDITION); adapters live in the
  deployment's registry shared with the HTTP routes (``runtime.lora_registry``); a local
  ``source_path`` needs ``VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES`` (vLLM's Rust frontend's rule).
- Pause, sleep and weight versions are the engine UTILITY calls the dev-mode HTTP routes make,
  sent to every engine, one such call at a time; sleep needs ``--enable-sleep-mode`` and weight
  updates a weight-transfer backend on every engine (else FAILED_PRECONDITION).
- ``Shutdown`` is FAILED_PRECONDITION: greenfront does not manage the engine processes' life the
  way this RPC means (``vllm serve`` or the operator does).
- The payload-carrying weight-transfer RPCs (``InitWeightTransferEngine``, ``UpdateWeights``)
  are UNIMPLEMENTED once a backend is configured: greenfront does not carry those payloads.

Runs on: the HTTP hub.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import gevent.lock

from base.errors import ApiError, EngineUnavailable
from resources.admin.engines import NO_TIMEOUT, call_all, consensus, engine_client
from resources.admin.lora import check_path, load_adapter, unload_adapter
from rpc.call import Call
from rpc.control_info import kv_event_sources, model_info, server_info
from rpc.dispatch import Method
from rpc.proto import control_pb2 as pb
from rpc.status import Code, RpcError
from runtime.lora_registry import lora_registry
from runtime.state import WorkerState

_PAUSE_MODES = {pb.PAUSE_MODE_UNSPECIFIED: "abort", pb.PAUSE_MODE_ABORT: "abort",
                pb.PAUSE_MODE_WAIT: "wait", pb.PAUSE_MODE_KEEP: "keep"}
_NO_SLEEP = "sleep mode is not configured; start vLLM with --enable-sleep-mode"
_NO_TRANSFER = "weight transfer is not configured; start vLLM with --weight-transfer-config"
_NO_LORA = "engine was not started with LoRA enabled"


class ControlService:
    """The Control RPCs of one worker; ``abort`` ends live Inference calls by request id."""

    def __init__(self, state: WorkerState, abort: Callable[[list[str]], None]) -> None:
        self._state = state
        self._abort = abort
        self._rl_lock = gevent.lock.Semaphore()  # one lifecycle change at a time

    def methods(self) -> dict[str, Method]:
        out = {}
        for method in pb.DESCRIPTOR.services_by_name["Control"].methods:
            handler = getattr(self, "_" + _snake(method.name))
            out[f"/vllm.Control/{method.name}"] = Method(
                getattr(pb, method.input_type.name), handler)
        return out

    def _client(self) -> Any:
        return engine_client(self._state)

    def _regs(self) -> list[Any]:
        client = self._client()
        return [client.registrations[rank] for rank in client.ranks]

    # -- discovery ---------------------------------------------------------------------------
    def _get_server_info(self, call: Call, request: Any) -> pb.ServerInfo:
        return server_info(self._client())

    def _get_model_info(self, call: Call, request: Any) -> pb.ModelInfo:
        return model_info(self._state.config, self._regs())

    def _get_kv_event_sources(self, call: Call, request: Any) -> pb.GetKvEventSourcesResponse:
        return pb.GetKvEventSourcesResponse(sources=kv_event_sources(self._regs()))

    def _shutdown(self, call: Call, request: Any) -> pb.ShutdownResponse:
        raise RpcError(Code.FAILED_PRECONDITION, "this frontend does not manage the engine process")

    def _abort_(self, call: Call, request: pb.AbortRequest) -> pb.AbortResponse:
        if request.request_ids:
            self._abort(list(request.request_ids))
        return pb.AbortResponse()

    # -- LoRA ----------------------------------------------------------------------------------
    def _require_lora(self) -> None:
        if not all(reg.supports_lora for reg in self._regs()):
            raise RpcError(Code.FAILED_PRECONDITION, _NO_LORA)

    def _load_lora(self, call: Call, request: pb.LoadLoraRequest) -> pb.LoadLoraResponse:
        self._require_lora()
        name, path = request.lora_name, request.source_path
        if not name.strip() or not path.strip():
            raise RpcError(Code.INVALID_ARGUMENT, "lora_name and source_path are required")
        config = self._state.config
        if name in config.model_names:
            raise RpcError(Code.ALREADY_EXISTS,
                           f"LoRA adapter `{name}` conflicts with a served base model")
        registry = lora_registry(config)
        if any(a.name == name for a in registry.adapters()):
            raise RpcError(Code.ALREADY_EXISTS, f"LoRA adapter `{name}` is already loaded")
        prefixes = config.runtime_lora_allowed_path_prefixes
        if not prefixes and path.startswith(("/", ".", "~")):
            raise RpcError(Code.INVALID_ARGUMENT, "Local LoRA adapter paths require "
                           "VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES to be configured.")
        check_path(path, prefixes)
        with self._rl_lock:
            load_adapter(self._state, registry, name, path)
        adapter = next(a for a in registry.adapters() if a.name == name)
        return pb.LoadLoraResponse(adapter=_adapter(adapter))

    def _unload_lora(self, call: Call, request: pb.UnloadLoraRequest) -> pb.UnloadLoraResponse:
        name = request.lora_name
        if not name.strip():
            raise RpcError(Code.INVALID_ARGUMENT, "lora_name is required")
        self._require_lora()
        registry = lora_registry(self._state.config)
        if not any(a.name == name for a in registry.adapters()):
            raise RpcError(Code.NOT_FOUND, f"LoRA adapter `{name}` is not loaded")
        with self._rl_lock:
            adapter = unload_adapter(self._state, registry, name)
        return pb.UnloadLoraResponse(adapter=_adapter(adapter))

    def _list_loras(self, call: Call, request: Any) -> pb.ListLorasResponse:
        self._require_lora()
        adapters = sorted(lora_registry(self._state.config).adapters(), key=lambda a: a.name)
        return pb.ListLorasResponse(adapters=[_adapter(a) for a in adapters])

    # -- pause and sleep -----------------------------------------------------------------------
    def _utility(self, name: str, method: str, args: list, agree: bool = False) -> Any:
        client = self._client()
        try:
            if agree:
                return consensus(client, method, args)
            with self._rl_lock:
                return call_all(client, method, args, timeout=NO_TIMEOUT)
        except EngineUnavailable:
            raise
        except ApiError as exc:
            raise RpcError(Code.INTERNAL, f"{name} failed: {exc.message}") from None

    def _pause_generation(self, call: Call, request: pb.PauseGenerationRequest) -> Any:
        clear = request.clear_cache if request.HasField("clear_cache") else True
        self._utility("pause_generation", "pause_scheduler", [_pause_mode(request.mode), clear])
        return pb.PauseGenerationResponse()

    def _resume_generation(self, call: Call, request: Any) -> Any:
        self._utility("resume_generation", "resume_scheduler", [])
        return pb.ResumeGenerationResponse()

    def _is_paused(self, call: Call, request: Any) -> Any:
        paused = self._utility("is_paused", "is_scheduler_paused", [], agree=True)
        return pb.IsPausedResponse(paused=bool(paused))

    def _require_sleep_mode(self) -> None:
        if not all(reg.enable_sleep_mode for reg in self._regs()):
            raise RpcError(Code.FAILED_PRECONDITION, _NO_SLEEP)

    def _sleep(self, call: Call, request: pb.SleepRequest) -> Any:
        self._require_sleep_mode()
        mode = _pause_mode(request.mode)
        level = request.level if request.HasField("level") else 1
        self._utility("sleep", "sleep", [level, mode])
        self._state.metrics.record_sleep_state(sleeping=True, level=level)
        return pb.SleepResponse()

    def _wake_up(self, call: Call, request: pb.WakeUpRequest) -> Any:
        self._require_sleep_mode()
        results = self._utility("wake_up", "wake_up", [list(request.tags) or None])
        if all(results):
            self._state.metrics.record_sleep_state(sleeping=False)
        return pb.WakeUpResponse()

    def _is_sleeping(self, call: Call, request: Any) -> Any:
        sleeping = self._utility("is_sleeping", "is_sleeping", [], agree=True)
        return pb.IsSleepingResponse(sleeping=bool(sleeping))

    # -- weights -------------------------------------------------------------------------------
    def _require_transfer(self) -> None:
        backends = {reg.weight_transfer_backend for reg in self._regs()}
        if len(backends) != 1 or None in backends:
            raise RpcError(Code.FAILED_PRECONDITION, _NO_TRANSFER)

    def _init_weight_transfer_engine(self, call: Call, request: Any) -> Any:
        self._require_transfer()
        _json_object(request.init_info_json, "init_info_json")
        raise RpcError(Code.UNIMPLEMENTED, "greenfront does not carry weight-transfer payloads")

    def _update_weights(self, call: Call, request: Any) -> Any:
        self._require_transfer()
        _json_object(request.update_info_json, "update_info_json")
        raise RpcError(Code.UNIMPLEMENTED, "greenfront does not carry weight-transfer payloads")

    def _start_weight_update(self, call: Call, request: Any) -> Any:
        self._require_transfer()
        self._utility("start_weight_update", "collective_rpc",
                      ["start_weight_update", None, [], None])
        return pb.StartWeightUpdateResponse()

    def _start_draft_weight_update(self, call: Call, request: Any) -> Any:
        self._require_transfer()
        if not all(reg.supports_draft_weight_updates for reg in self._regs()):
            raise RpcError(Code.FAILED_PRECONDITION,
                           "draft weight updates require a configured speculative draft model")
        self._utility("start_draft_weight_update", "collective_rpc",
                      ["start_draft_weight_update", None, [], None])
        return pb.StartDraftWeightUpdateResponse()

    def _finish_weight_update(self, call: Call, request: pb.FinishWeightUpdateRequest) -> Any:
        self._require_transfer()
        version = (_weight_version(request.weight_version)
                   if request.HasField("weight_version") else None)
        self._utility("finish_weight_update", "collective_rpc",
                      ["finish_weight_update", None, [], None])
        if version is not None:
            self._utility("update_weight_version", "set_weight_version", [version])
        return pb.FinishWeightUpdateResponse()

    def _update_weight_version(self, call: Call, request: Any) -> Any:
        version = _weight_version(request.weight_version)
        self._utility("update_weight_version", "set_weight_version", [version])
        return pb.UpdateWeightVersionResponse()

    def _get_weight_version(self, call: Call, request: Any) -> Any:
        version = self._utility("get_weight_version", "get_weight_version", [], agree=True)
        return pb.GetWeightVersionResponse(weight_version=version or "")


def _snake(name: str) -> str:
    out = "".join("_" + ch.lower() if ch.isupper() else ch for ch in name).lstrip("_")
    return "abort_" if out == "abort" else out


def _pause_mode(mode: int) -> str:
    if mode not in _PAUSE_MODES:
        raise RpcError(Code.INVALID_ARGUMENT, "invalid pause mode")
    return _PAUSE_MODES[mode]


def _weight_version(value: str) -> str:
    if not value.strip():
        raise RpcError(Code.INVALID_ARGUMENT, "weight_version must not be empty")
    return value


def _json_object(raw: bytes, field: str) -> dict:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise RpcError(Code.INVALID_ARGUMENT, f"{field} must contain valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise RpcError(Code.INVALID_ARGUMENT, f"{field} must contain a JSON object")
    return value


def _adapter(adapter: Any) -> pb.LoraAdapter:
    return pb.LoraAdapter(lora_id=adapter.int_id, lora_name=adapter.name,
                          source_path=adapter.path)
