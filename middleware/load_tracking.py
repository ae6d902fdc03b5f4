"""``--enable-server-load-tracking``: ``/load`` counts the generation requests in flight.

As vLLM 0.32's ``load_aware_call``: a POST to ``/v1/completions`` or ``/v1/chat/completions``
counts from when the worker takes it until its response's last byte (a request with ``n``
samples counts once); ``/load`` answers the deployment's count: this worker's
(``WorkerState.tracked_requests``) plus the other workers' (shared as the admission limits share
theirs, ``WorkerState.server_load``; ``docs/parity.md`` §5).
Without the option vLLM's ``/load`` always answers 0; greenfront's then answers the engine
requests this worker has in flight.

Runs on: the HTTP hub (the count's owner: it is changed and read only there).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from middleware.drain import counted_call

#: vLLM's load-aware routes that greenfront serves.
TRACKED = frozenset({"/v1/completions", "/v1/chat/completions"})


class LoadTracking:
    """Wraps the WSGI app: counts the tracked requests into ``state.tracked_requests``."""

    def __init__(self, app: Callable, state: Any) -> None:
        self._app = app
        self._state = state

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO") not in TRACKED:
            return self._app(environ, start_response)
        self._state.track_load(+1)
        return counted_call(self._app, environ, start_response, self._leave)

    def _leave(self) -> None:
        self._state.track_load(-1)

