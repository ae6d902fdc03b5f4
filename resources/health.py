"""Light routes that never leave the HTTP hub: /health, /version, /load.

Runs on: the HTTP hub.
"""
from __future__ import annotations

import falcon

import jsonio
from errors import EngineStalled, EngineUnavailable
from runtime.state import WorkerState

VERSION = "0.1.0"


class HealthResource:
    """200 with an empty body while the engines serve; 503 before registration, after death,
    while every engine is stalled (readiness: a load balancer sends requests elsewhere), and
    once an engine stayed silent for ``GREENFRONT_ENGINE_STALL_LIVENESS_TIMEOUT`` (liveness: an
    orchestrator restarts the deployment; a DP rank that hangs cannot be restarted alone)."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state
        self._liveness_timeout = state.config.engine_stall_liveness_timeout

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        client = self._state.client
        if client is None:
            raise EngineUnavailable("The engine core has not registered yet.")
        client.check_available()  # dead, not registered, or every engine stalled: its 503
        if client.stalled_ranks and self._liveness_timeout:
            silent = client.stalled_for()
            if silent >= self._liveness_timeout:
                raise EngineStalled(f"An engine has been stalled for {silent:.0f} s (over "
                                    f"{self._liveness_timeout:g} s): restart the deployment.")
        resp.status = falcon.HTTP_200
        resp.data = b""


class VersionResource:
    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        client = self._state.client
        engine_version = None
        if client is not None and client.registrations:
            engine_version = next(iter(client.registrations.values())).vllm_version
        resp.content_type = falcon.MEDIA_JSON
        resp.data = jsonio.dumps({"version": engine_version or "0.32.0",
                                  "greenfront_version": VERSION})


class LoadResource:
    """``{"server_load": n}``: requests this worker has in flight in the engines."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        client = self._state.client
        resp.content_type = falcon.MEDIA_JSON
        resp.data = jsonio.dumps({"server_load": client.in_flight if client else 0})


class MetricsResource:
    """Prometheus exposition of this worker's registry (vLLM's metric family names)."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        metrics = self._state.metrics
        resp.content_type = metrics.content_type
        resp.data = metrics.exposition()
