"""HTTP metrics as vLLM's server exposes them (prometheus-fastapi-instrumentator's defaults).

Per request: ``http_requests_total`` by method, status class (``2xx``) and handler (the route
template, ``none`` when no route matched), request and response sizes from their Content-Length
headers (0 without), and the duration until the response was completely written (a stream's
whole life) in the many-bucket ``http_request_duration_highr_seconds`` and the by-handler
``http_request_duration_seconds``. Probes and metadata (/health, /ready, /metrics, /load,
/version, /ping, /server_info) are not counted, as vLLM leaves them out.

Runs on: the HTTP hub (the outermost WSGI layer; counts gather in the hub's metric ``Batch``).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from middleware.offload import Closing
from runtime.metrics.families import HTTP_EXCLUDED

_CACHE_LIMIT = 1024


class HttpMetrics:
    """WSGI wrapper recording each request's metrics when its response is closed.

    Args:
        app: the WSGI app to wrap.
        metrics: ``runtime.metrics.Metrics`` (its ``http`` recorder exists once started).
        route_of: the route template a path matches, or None (Falcon's router).
    """

    def __init__(self, app: Callable, metrics: Any,
                 route_of: Callable[[str], str | None]) -> None:
        self._app = app
        self._metrics = metrics
        self._route_of = route_of
        self._handlers: dict[str, str] = {}


    def _handler(self, path: str) -> str:
        handler = self._handlers.get(path)
        if handler is None:
            handler = self._route_of(path) or "none"
            if len(self._handlers) < _CACHE_LIMIT:
                self._handlers[path] = handler
        return handler

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in HTTP_EXCLUDED or self._metrics.http is None:
            return self._app(environ, start_response)
        started = time.perf_counter()
        seen: list = []

        def recording_start_response(status: str, headers: list, exc_info: Any = None):
            seen[:] = (status, headers)
            return start_response(status, headers, exc_info)
        try:
            result = self._app(environ, recording_start_response)
        except BaseException:
            self._record(environ, path, ("500", []), started)
            raise
        return Closing(result, lambda: self._record(environ, path, seen, started))

    def _record(self, environ: dict, path: str, seen: list, started: float) -> None:
        status, headers = (seen[0], seen[1]) if seen else ("500", [])
        length = next((v for k, v in headers if k.lower() == "content-length"), 0)
        self._metrics.http.record(environ.get("REQUEST_METHOD", ""), status[:1] + "xx",
                                  self._handler(path), _int(environ.get("CONTENT_LENGTH")),
                                  _int(length), time.perf_counter() - started)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0
