"""The outermost WSGI layer: counts requests in flight and refuses new ones while draining.

While the worker drains (``runtime.shutdown``) every request except the probes and the metrics
scrape is answered 503 with ``Connection: close`` — also on a keep-alive connection opened
before SIGTERM, which gunicorn would otherwise serve. The probes keep answering: ``/ready`` says
503 itself, ``/health`` stays the liveness answer, ``/metrics`` lets the drain be watched.

Runs on: the HTTP hub.
"""
from __future__ import annotations

from typing import Callable, Iterable

from streaming.error_response import http_parts
from runtime.shutdown import Drain

#: Answered during the drain as at any time.
PROBE_PATHS = frozenset({"/health", "/ready", "/metrics", "/ping"})


class CountedBody:
    """The response iterable; the request leaves the count when gunicorn closes it."""

    __slots__ = ("_iterable", "_leave")

    def __init__(self, iterable: Iterable[bytes], leave: Callable[[], None]) -> None:
        self._iterable = iterable
        self._leave = leave

    def __iter__(self):
        return iter(self._iterable)

    def close(self) -> None:
        leave, self._leave = self._leave, None
        try:
            close = getattr(self._iterable, "close", None)
            if close is not None:
                close()
        finally:
            if leave is not None:
                leave()


def counted_call(app: Callable, environ: dict, start_response: Callable,
                 leave: Callable[[], None]) -> Iterable[bytes]:
    """Run ``app`` for a request that has entered a count; ``leave`` runs once, when the
    response is closed, or at once if the app raises."""
    try:
        result = app(environ, start_response)
    except BaseException:
        leave()
        raise
    return CountedBody(result, leave)


class DrainMiddleware:
    """Wraps the WSGI app: ``drain`` counts what runs and says when to refuse."""

    def __init__(self, app: Callable, drain: Drain) -> None:
        self._app = app
        self.drain = drain

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        drain = self.drain
        if drain.draining and environ.get("PATH_INFO") not in PROBE_PATHS:
            status, headers, body = http_parts(drain.refusal())
            start_response(status, headers + [("Connection", "close")])
            return [body]
        drain.enter()
        return counted_call(self._app, environ, start_response, drain.leave)

