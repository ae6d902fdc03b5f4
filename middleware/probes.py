"""The probe fast path: a healthy ``GET /health`` or a ready ``GET /ready`` answered in one layer.

Load balancers and orchestrators probe these paths on fresh connections many times a second, in
the HTTP hub. Through the whole stack a 200 passes the drain's count, the HTTP metrics (which
leave probes out), the task-route check, the offload driver and Falcon's request, routing and
response objects, and each adds nothing to it. This layer, just inside ``--root-path``, answers
the 200 itself with the header list Falcon gives those resources (``FALCON_EMPTY_200``), through
the same ``Cors`` and ``RequestId`` layers the full stack uses, so a probe's answer is unchanged
byte for byte (tests/integration/test_probe_fast_path.py compares both paths).

Everything else goes down the full stack as before: other methods and paths, a 503 (the error
envelope is Falcon's to render), and every probe while the worker drains (``DrainMiddleware``
then counts it in flight, as it counts every request it lets through).

PERF: CPU per healthy /health probe on a fresh connection (Connection: close), one idle worker
each, two deployments probed alternately (a concurrent A/B; /proc CPU of each worker): this path
÷ the full stack 0.93-0.97 in two runs of 8-10 blocks of 1,000-1,500 probes (e.g. medians 400
against 430 µs on a loaded machine, 190 µs unloaded); the rest is gunicorn's and gevent's
per-connection work. py-spy (``--gil``) had the full WSGI stack at 7% of the worker's samples.

Not counted in flight here: the answer is a few header bytes written to a fresh socket buffer
right after this call returns, with no switch to another greenlet in between, so the drain can
never see the difference.

Runs on: the HTTP hub.
"""
from __future__ import annotations

from typing import Callable, Iterable

from resources.health import health_error
from runtime.shutdown import Drain
from runtime.state import WorkerState

#: What Falcon answers for ``HealthResource``'s and ``ReadyResource``'s 200: an empty body, its
#: default media type, header names as Falcon spells them.
FALCON_EMPTY_200 = ("200 OK", [("content-length", "0"), ("content-type", "application/json")])


def empty_200(environ: dict, start_response: Callable) -> Iterable[bytes]:
    """The innermost app of the fast path: the 200 the probe resources answer."""
    status, headers = FALCON_EMPTY_200
    start_response(status, list(headers))
    return [b""]


class ProbeFastPath:
    """Wraps the full stack ``app``; ``answer`` is ``empty_200`` inside the same header layers
    (``app._wrap``); ``state`` and ``drain`` are the worker's."""

    def __init__(self, app: Callable, answer: Callable, state: WorkerState, drain: Drain) -> None:
        self._app = app
        self._answer = answer
        self._state = state
        self._drain = drain
        self._liveness_timeout = state.config.engine_stall_liveness_timeout

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO")
        if ((path == "/health" or path == "/ready") and environ.get("REQUEST_METHOD") == "GET"
                and not self._drain.draining and self._answers_200(path)):
            return self._answer(environ, start_response)
        return self._app(environ, start_response)

    def _answers_200(self, path: str) -> bool:
        """Whether the probe's resource would answer 200 now; anything else (a 503, something
        raised) is left to the full stack to answer as it always has."""
        try:
            if path == "/health":
                return health_error(self._state, self._liveness_timeout) is None
            return not self._state.readiness.not_ready_reasons()
        except Exception:  # noqa: BLE001 - the full stack renders it
            return False
