"""Two values gunicorn recomputes for every HTTP/1 request, computed once in a greenfront worker.

gunicorn (27) builds, for each request, a fresh base WSGI environ (``http.wsgi.base_environ``:
its ``wsgi.errors`` wrapper walks the error logger's handlers) and formats the ``Date`` header
from the clock (``util.http_date``: ``email.utils.formatdate``). Both are the same for every
request of a worker, the date for every request within one second. ``install`` (from the
worker, after fork) replaces the two module functions gunicorn calls by name with cached ones
that answer exactly what gunicorn's would:

- the base environ is built once by gunicorn's own function, for the worker's ``cfg``, and each
  request gets a copy; any other ``cfg`` gets gunicorn's function. gunicorn's pywsgi worker
  shares one base environ per listener the same way. ``refresh`` rebuilds it after the log files
  are reopened (SIGUSR1), so ``wsgi.errors`` writes to the new streams;
- the Date text is formatted once per second by gunicorn's function and reused within it.

PERF: together 6-7 µs per request on this VM (base environ 3.9 µs, a dict copy 0.1 µs; http_date
2.8 µs, the cached one 0.3 µs; tests/unit/runtime/test_gunicorn_hot_path.py checks both answer as
gunicorn's do).

Runs on: the worker's main thread (``install``, ``refresh`` from the HTTP hub) and the HTTP hub
(each request); the two caches are that hub's (a single tuple assignment each, safe to read from
any thread).
"""
from __future__ import annotations

import time
from typing import Any, Callable

from gunicorn import util
from gunicorn.http import wsgi

_gunicorn_base_environ: Callable[[Any], dict] = wsgi.base_environ
_gunicorn_http_date: Callable[..., str] = util.http_date

#: (the cfg it was built for, the base environ); owned by the HTTP hub.
_environ: tuple[Any, dict] | None = None
#: (the whole second, gunicorn's Date text for it); owned by the HTTP hub.
_date: tuple[int, str] = (-1, "")


def install(cfg: Any) -> None:
    """In a worker process: gunicorn's per-request base environ and Date from the caches."""
    global _environ
    _environ = (cfg, _gunicorn_base_environ(cfg))
    wsgi.base_environ = base_environ
    util.http_date = http_date


def refresh() -> None:
    """Rebuild the base environ (after the log files were reopened)."""
    global _environ
    if _environ is not None:
        _environ = (_environ[0], _gunicorn_base_environ(_environ[0]))


def base_environ(cfg: Any) -> dict:
    """gunicorn's ``base_environ(cfg)``: a copy of the one built for this worker's cfg."""
    cached = _environ
    if cached is not None and cached[0] is cfg:
        return cached[1].copy()
    return _gunicorn_base_environ(cfg)


def http_date(timestamp: float | None = None) -> str:
    """gunicorn's ``http_date``: the text for the current second is formatted once."""
    global _date
    if timestamp is not None:
        return _gunicorn_http_date(timestamp)
    second = int(time.time())
    cached = _date
    if cached[0] != second:
        cached = _date = (second, _gunicorn_http_date(second))
    return cached[1]
