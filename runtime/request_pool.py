"""The request-work pool: native OS threads behind ``gevent.threadpool.ThreadPool``.

Offloaded requests run here: JSON parsing, validation, chat-template rendering and tokenization
(GIL-releasing ``*_batch`` calls). One pool per worker process, made lazily after fork (a pool made
before fork would have threads that do not exist in the child).

Runs on: created from the HTTP hub; its threads run the offloaded Falcon calls.
"""
from __future__ import annotations

import os
import sys

from gevent.threadpool import ThreadPool

_pool: ThreadPool | None = None
_pool_pid: int | None = None


def get_pool(size: int, switch_interval: float) -> ThreadPool:
    """The process's request pool, created on first use in this process."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        # NOTE: gevent-physics.md §1: with the default 5 ms switch interval a Python-heavy pool
        # thread (jinja2) holds the HTTP hub for up to 5 ms at a time.
        if switch_interval > 0:
            sys.setswitchinterval(switch_interval)
        _pool = ThreadPool(size)
        _pool_pid = os.getpid()
    return _pool


def shutdown_pool() -> None:
    """Stop accepting work without waiting for running tasks (shutdown never blocks on a pool)."""
    global _pool
    if _pool is not None and _pool_pid == os.getpid():
        _pool.kill()
    _pool = None
