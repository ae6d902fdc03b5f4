"""The development routes behind ``VLLM_SERVER_DEV_MODE=1``: caches, sleep, pause, RPC, server info.

Each route maps to engine UTILITY calls (docs/engine-protocol.md §3.5) as vLLM 0.32's Python frontend makes them
(``vllm/entrypoints/serve/dev/*`` and ``vllm/entrypoints/rl/online``); bodies and status codes are
that frontend's.

Route → utility (args) → fan-out → answer:
- POST /reset_prefix_cache?reset_running_requests=false&reset_external=false →
  reset_prefix_cache [a, b] → all ranks, AND → ``{"success": bool}``
- POST /reset_mm_cache, /reset_encoder_cache → the same-named utility [] → all → 200, no body
- POST /sleep?level=1&mode=abort → sleep [level, mode] → all →
  ``{"status": "sleeping", "level": n}``
- POST /release_kv_cache_memory → release_kv_cache_memory [] → all →
  ``{"status": "kv_cache_released"}``
- POST /wake_up?tags=a&tags=b → wake_up [tags or nil] → all, AND →
  ``{"status": "awake" | "sleeping", "tags": [...] | null}``
- GET /is_sleeping → is_sleeping [] → all, must agree → ``{"is_sleeping": bool}``
- POST /pause?mode=abort&clear_cache=true → pause_scheduler [mode, clear_cache] (0.33 engines:
  pause_generation, docs/vllm-versions.md) → all → ``{"status": "paused"}``
- POST /resume → resume_scheduler [] → all → ``{"status": "resumed"}``
- GET /is_paused → is_scheduler_paused [] → all, must agree → ``{"is_paused": bool}``
- POST /collective_rpc ``{method, timeout?, args?, kwargs?}`` →
  collective_rpc [method, timeout, args, kwargs] → all, rank 0's result →
  ``{"results": [...]}`` (200, no body, for a nil result)
- POST /start_weight_update, /start_draft_weight_update → collective_rpc [name, nil, [], nil]
  → all → ``{"message": "... started"}``
- POST /finish_weight_update ``{weight_version?}`` → collective_rpc, then set_weight_version
  → all → ``{"message": "Weight update finished"}``
- POST /update_weight_version ``{new_version}`` → set_weight_version [v] → all →
  ``{"success": true, "new_version": v}``
- GET /weight_info → get_weight_version [] → all, must agree → ``{"weight_version": v}``
- GET /get_world_size?include_dp=true → (rank 0's registration) → ``{"world_size": n}``
- GET /server_info?config_format=text|json → (Config, registrations) →
  ``{"vllm_config", "vllm_env", "system_env", "engines"}``, secrets redacted

Choices:
- Fan-out: vLLM's multi-engine client sends every utility to every engine (queries too, then
  requires agreement: a 500 "Engines returned different ... results"), so these routes do the
  same over ``client.ranks``; sending a query to rank 0 alone would hide a split state.
- /pause, /resume, /is_paused answer engine failures with vLLM's own ``{"error": "Failed to ...:
  <message>"}`` 500 body; every other route raises the usual error envelope (500 with the
  engine's failure message, 503 when the engines are dead or not registered).
- /sleep and /wake_up do not check the registration's ``enable_sleep_mode``: vLLM's frontend
  does not either; a real engine fails the call, and that failure is the answer (500).
- Weight-transfer routes that carry backend payloads (/init_weight_transfer_engine,
  /update_weights, /weight_checker) and /abort_requests are not provided.

Runs on: the HTTP hub (never offloaded: every route is a short engine round-trip).
"""
from __future__ import annotations

import os
import platform
from typing import Callable

import falcon
import msgspec

from base import jsonio
from base.errors import ApiError, RequestValidationError
from engine.registrations import speaks_033
from resources.admin.engines import (
    NO_TIMEOUT,
    Query,
    call_all,
    call_each,
    consensus,
    engine_client,
    reply_empty,
    reply_json,
)
from resources.common.fields import (
    MISSING,
    parse_fields,
    require_object,
    v_bool,
    v_int,
    v_literal,
    v_nullable,
    v_str,
)
from resources.health import VERSION
from runtime.state import WorkerState

PAUSE_MODES = ("abort", "wait", "keep")


class _Resource:
    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def _client(self):
        return engine_client(self._state)


# -- caches --------------------------------------------------------------------------------------
class ResetPrefixCacheResource(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        q = Query(req)
        running = q.get("reset_running_requests", v_bool(), False)
        external = q.get("reset_external", v_bool(), False)
        q.check()
        # The engine's second argument is ``reset_connector``: vLLM's route names it external.
        results = call_all(self._client(), "reset_prefix_cache", [running, external])
        reply_json(resp, {"success": all(bool(r) for r in results)})


class ResetCacheResource(_Resource):
    """/reset_mm_cache and /reset_encoder_cache: fire the reset, 200 with no body."""

    def __init__(self, state: WorkerState, method: str) -> None:
        super().__init__(state)
        self._method = method

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        call_all(self._client(), self._method)
        reply_empty(resp)


# -- sleep -----------------------------------------------------------------------------------------
class SleepResource(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        q = Query(req)
        level = q.get("level", v_int(ge=0, le=2), 1)
        mode = q.get("mode", v_literal(*PAUSE_MODES), "abort")
        q.check()
        call_all(self._client(), "sleep", [level, mode], timeout=NO_TIMEOUT)
        self._state.metrics.record_sleep_state(sleeping=True, level=level)
        reply_json(resp, {"status": "sleeping", "level": level})


class ReleaseKvCacheResource(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        call_all(self._client(), "release_kv_cache_memory", timeout=NO_TIMEOUT)
        reply_json(resp, {"status": "kv_cache_released"})


class WakeUpResource(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        # No tags means "wake everything", which the engine spells nil.
        tags: list[str] | None = Query(req).get_list("tags") or None
        results = call_all(self._client(), "wake_up", [tags], timeout=NO_TIMEOUT)
        fully_awake = all(results)
        if fully_awake:
            self._state.metrics.record_sleep_state(sleeping=False)
        reply_json(resp, {"status": "awake" if fully_awake else "sleeping", "tags": tags})


class IsSleepingResource(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        reply_json(resp, {"is_sleeping": consensus(self._client(), "is_sleeping")})


# -- pause ---------------------------------------------------------------------------------------
def _reply_or_failed(resp: falcon.Response, doing: str, answer: Callable[[], dict]) -> None:
    """The pause routes' reply: ``answer()``, or vLLM's ``{"error": "Failed to <doing>: …"}``
    with 500 when an engine call in it fails."""
    try:
        body = answer()
    except ApiError as exc:
        reply_json(resp, {"error": f"Failed to {doing}: {exc.message}"}, 500)
        return
    reply_json(resp, body)


class PauseResource(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        q = Query(req)
        mode = q.get("mode", v_literal(*PAUSE_MODES), "abort")
        clear_cache = q.get("clear_cache", v_bool(), True)
        q.check()
        client = self._client()

        def pause() -> dict:
            # mode=wait answers only once the running requests finished: no timeout. 0.33
            # engines pause with pause_generation, which also refuses new requests (a retryable
            # 503) instead of queueing them, as vLLM 0.33's frontends call it.
            new = [r for r in client.ranks if speaks_033(client.registrations.get(r))]
            old = [r for r in client.ranks if r not in new]
            jobs = [(method, ranks) for method, ranks in (("pause_generation", new),
                                                          ("pause_scheduler", old)) if ranks]
            for method, ranks in jobs:
                for _rank, ok, value in call_each(client, method, [mode, clear_cache],
                                                  timeout=NO_TIMEOUT, ranks=ranks):
                    if not ok:
                        raise value
            return {"status": "paused"}
        _reply_or_failed(resp, "pause generation", pause)


class ResumeResource(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        client = self._client()

        def resume() -> dict:
            call_all(client, "resume_scheduler")
            return {"status": "resumed"}
        _reply_or_failed(resp, "resume generation", resume)


class IsPausedResource(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        client = self._client()
        _reply_or_failed(resp, "fetch pause status",
                         lambda: {"is_paused": consensus(client, "is_scheduler_paused")})


# -- RPC and weights -------------------------------------------------------------------------------
def _bad_request(message: str) -> RequestValidationError:
    # vLLM raises HTTPException(400, detail): the envelope's type is the phrase "Bad Request".
    return RequestValidationError(message)


def _optional_json_object(req: falcon.Request) -> dict:
    """A body that may be absent (FastAPI's ``Body(embed=True)`` with defaults)."""
    raw = req.bounded_stream.read()
    if not raw.strip():
        return {}
    return require_object(jsonio.loads_body(raw))


class CollectiveRpcResource(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = req.bounded_stream.read()
        try:
            body = jsonio.loads(raw)
        except ValueError as exc:
            raise _bad_request(f"JSON decode error: {exc}") from None
        if not isinstance(body, dict):
            raise _bad_request("Request body must be a JSON object")
        method = body.get("method")
        if method is None:
            raise _bad_request("Missing 'method' in request body")
        # vLLM passes these through unchecked (a string `args` would be split into characters);
        # refusing the wrong shapes here gives a clear 400 instead of an engine failure.
        args = body.get("args", [])
        kwargs = body.get("kwargs", {})
        timeout = body.get("timeout")
        if not isinstance(method, str):
            raise _bad_request("'method' must be a string")
        if not isinstance(args, list):
            raise _bad_request("'args' must be a list")
        if not isinstance(kwargs, dict):
            raise _bad_request("'kwargs' must be an object")
        if timeout is not None and (isinstance(timeout, bool)
                                    or not isinstance(timeout, (int, float))):
            raise _bad_request("'timeout' must be a number")
        # Every engine runs it; like vLLM's client, answer with the first engine's result.
        results = call_all(self._client(), "collective_rpc", [method, timeout, args, kwargs],
                           timeout=NO_TIMEOUT)[0]
        if results is None:
            reply_empty(resp)
            return
        shown = [r if r is None or isinstance(r, (dict, list)) else str(r) for r in results]
        reply_json(resp, {"results": shown})


class WeightUpdateStepResource(_Resource):
    """/start_weight_update and /start_draft_weight_update: a worker method run everywhere."""

    def __init__(self, state: WorkerState, method: str, message: str) -> None:
        super().__init__(state)
        self._method = method
        self._message = message

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        call_all(self._client(), "collective_rpc", [self._method, None, [], None],
                 timeout=NO_TIMEOUT)
        reply_json(resp, {"message": self._message})


FINISH_WEIGHT_UPDATE_FIELDS = [("weight_version", v_nullable(v_str()), None)]
UPDATE_WEIGHT_VERSION_FIELDS = [("new_version", v_str(), MISSING)]


class FinishWeightUpdateResource(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = parse_fields(_optional_json_object(req), FINISH_WEIGHT_UPDATE_FIELDS)
        client = self._client()
        call_all(client, "collective_rpc", ["finish_weight_update", None, [], None],
                 timeout=NO_TIMEOUT)
        if body["weight_version"] is not None:
            call_all(client, "set_weight_version", [body["weight_version"]])
        reply_json(resp, {"message": "Weight update finished"})


class UpdateWeightVersionResource(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = parse_fields(_optional_json_object(req), UPDATE_WEIGHT_VERSION_FIELDS)
        call_all(self._client(), "set_weight_version", [body["new_version"]])
        reply_json(resp, {"success": True, "new_version": body["new_version"]})


class WeightInfoResource(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        reply_json(resp, {"weight_version": consensus(self._client(), "get_weight_version")})


# -- server information ----------------------------------------------------------------------
class WorldSizeResource(_Resource):
    """TP x PP of one engine (its registration's ``world_size``), times the DP size by default."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        q = Query(req)
        include_dp = q.get("include_dp", v_bool(), True)
        q.check()
        client = self._client()
        reg = client.registrations[client.ranks[0]]
        size = reg.world_size * (reg.data_parallel_size if include_dp else 1)
        reply_json(resp, {"world_size": size})


class ServerInfoResource(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        q = Query(req)
        config_format = q.get("config_format", v_literal("text", "json"), "text")
        q.check()
        config = self._state.config
        data = config.redacted()
        client = self._state.client
        engines = {str(rank): msgspec.to_builtins(reg)
                   for rank, reg in sorted((client.registrations if client else {}).items())}
        reply_json(resp, {
            "vllm_config": (data if config_format == "json" else
                            ", ".join(f"{k}={v!r}" for k, v in data.items())),
            "vllm_env": config.vllm_env(),
            "system_env": {
                "greenfront_version": VERSION,
                "python_version": platform.python_version(),
                "platform": platform.platform(),
                "cpu_count": os.cpu_count(),
                "pid": os.getpid(),
            },
            "engines": engines,
        })


def register(app: falcon.App, state: WorkerState) -> None:
    """Add the dev-mode routes (the caller checked ``config.server_dev_mode``)."""
    app.add_route("/reset_prefix_cache", ResetPrefixCacheResource(state))
    app.add_route("/reset_mm_cache", ResetCacheResource(state, "reset_mm_cache"))
    app.add_route("/reset_encoder_cache", ResetCacheResource(state, "reset_encoder_cache"))
    app.add_route("/sleep", SleepResource(state))
    app.add_route("/release_kv_cache_memory", ReleaseKvCacheResource(state))
    app.add_route("/wake_up", WakeUpResource(state))
    app.add_route("/is_sleeping", IsSleepingResource(state))
    app.add_route("/pause", PauseResource(state))
    app.add_route("/resume", ResumeResource(state))
    app.add_route("/is_paused", IsPausedResource(state))
    app.add_route("/collective_rpc", CollectiveRpcResource(state))
    app.add_route("/start_weight_update",
                  WeightUpdateStepResource(state, "start_weight_update", "Weight update started"))
    app.add_route("/start_draft_weight_update",
                  WeightUpdateStepResource(state, "start_draft_weight_update",
                                           "Draft weight update started"))
    app.add_route("/finish_weight_update", FinishWeightUpdateResource(state))
    app.add_route("/update_weight_version", UpdateWeightVersionResource(state))
    app.add_route("/weight_info", WeightInfoResource(state))
    app.add_route("/get_world_size", WorldSizeResource(state))
    app.add_route("/server_info", ServerInfoResource(state))
