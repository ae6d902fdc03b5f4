"""Light routes that never leave the HTTP hub: /health, /ready, /version, /load, /metrics.

Runs on: the HTTP hub.
"""
from __future__ import annotations

import falcon

from base import jsonio
from base.errors import ApiError, EngineStalled, EngineUnavailable
from runtime.request_pool import get_pool
from runtime.state import WorkerState

VERSION = "0.1.0"


class HealthResource:
    """200 with an empty body while the engines serve; 503 before registration, after death,
    while every engine is stalled (readiness: a load balancer sends requests elsewhere), and
    once an engine stayed silent for ``GREENFRONT_ENGINE_STALL_LIVENESS_TIMEOUT`` (liveness: an
    orchestrator restarts the deployment; a DP rank that hangs cannot be restarted alone)."""

    media_type = None  # an empty body

    def __init__(self, state: WorkerState) -> None:
        self._state = state
        self._liveness_timeout = state.config.engine_stall_liveness_timeout

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        error = health_error(self._state, self._liveness_timeout)
        if error is not None:
            raise error
        resp.status = falcon.HTTP_200
        resp.data = b""


def health_error(state: WorkerState, liveness_timeout: float) -> ApiError | None:
    """Why ``/health`` answers 503 now, or None for its 200 (``HealthResource``; the probe fast
    path, ``middleware.probes``, asks the same)."""
    client = state.client
    if client is None:
        return EngineUnavailable("The engine core has not registered yet.")
    try:
        client.check_available()  # dead, not registered, or every engine stalled: its 503
    except ApiError as error:
        return error
    if client.stalled_ranks and liveness_timeout:
        silent = client.stalled_for()
        if silent >= liveness_timeout:
            return EngineStalled(f"An engine has been stalled for {silent:.0f} s (over "
                                 f"{liveness_timeout:g} s): restart the deployment.")
    return None


class ReadyResource:
    """``/ready``: 200 while this worker should be sent requests (``runtime.readiness``), else 503
    with the reasons. Cheap like /health: answered in the HTTP hub."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        reasons = self._state.readiness.not_ready_reasons()
        if reasons:
            raise EngineUnavailable("Not ready: " + "; ".join(reasons) + ".")
        resp.status = falcon.HTTP_200
        resp.data = b""


class VersionResource:
    """The vLLM version the engines report, and greenfront's. ``rust_frontend_version`` is the
    engines' vLLM version too: greenfront stands where vLLM's Rust frontend would, and vLLM's
    tooling (its own tests under ``VLLM_USE_RUST_FRONTEND=1``) expects the vLLM release there
    (``docs/parity.md`` §1)."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        client = self._state.client
        engine_version = None
        if client is not None and client.registrations:
            engine_version = next(iter(client.registrations.values())).vllm_version
        resp.content_type = falcon.MEDIA_JSON
        version = engine_version or "0.32.0"
        resp.data = jsonio.dumps({"version": version, "rust_frontend_version": version,
                                  "greenfront_version": VERSION})


class LoadResource:
    """``{"server_load": n}``: the deployment's completions and chat requests in flight with
    ``--enable-server-load-tracking`` (vLLM's count), else this worker's engine requests."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        resp.data = jsonio.dumps({"server_load": self._state.server_load()})


class MetricsResource:
    """``/metrics``: the whole deployment's metrics (every worker's, ``runtime.metrics``), as
    Prometheus text, or OpenMetrics when the scraper's Accept header asks for it.

    PERF: a multiprocess collect reads and merges every worker's files: 91 ms for two workers'
    10 files (a 40 kB scrape) on this 2-core machine at load average 11 (prometheus-client's
    MultiProcessCollector, mean of 50), far too long to hold the HTTP
    hub; it runs on a request-pool thread while this greenlet waits.
    """

    media_type = "text/plain"

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        state = self._state
        accept = req.get_header("Accept") or ""
        state.flush_metrics()
        if state.config.offload:
            body, content_type = get_pool(state.config).apply(state.metrics.exposition, (accept,))
        else:
            body, content_type = state.metrics.exposition(accept)
        resp.content_type = content_type
        resp.data = body


class KvEventSourcesResource:
    """``GET /kv_event_sources``: each DP rank's ``kv_events_config`` from its registration
    (the ranks that report one), keyed by the rank as a string, as vLLM 0.33's frontends
    answer; ``{}`` before the engines registered."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        client = self._state.client
        registrations = client.registrations if client is not None else {}
        sources = {str(r.data_parallel_rank): r.kv_events_config
                   for _, r in sorted(registrations.items())
                   if r.kv_events_config is not None}
        resp.content_type = falcon.MEDIA_JSON
        resp.data = jsonio.dumps(sources)
