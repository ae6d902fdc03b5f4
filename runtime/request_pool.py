"""The request-work pool: native OS threads from ``gevent.threadpool.ThreadPool``, fed by one
native queue, answering through a ``HubInbox``.

Offloaded requests run here: JSON parsing, validation, chat-template rendering and tokenization
(GIL-releasing ``*_batch`` calls). One pool per worker process, made lazily after fork (a pool made
before fork would have threads that do not exist in the child).

Why not ``ThreadPool.apply`` per request: gevent frees a pool slot through a callback in the hub,
so at most ``size`` requests are queued or running and each further one waits for a hub loop
iteration. Under 1,000 streams an iteration is several milliseconds of output dispatch, and new
requests were admitted at ~2 per iteration (make bench: time to first token p99 of 20 s). Here the
ThreadPool's threads each run one long task that takes work from a native queue, which accepts
any number of requests without the hub, and results come back coalesced through one async
watcher (docs/architecture.md §5.2).

Runs on: created and called from the HTTP hub; its threads run the offloaded Falcon calls.
"""
from __future__ import annotations

import _queue  # the C SimpleQueue: gevent's monkey-patching swaps out ``queue.SimpleQueue``
import logging
import os
import sys
import threading
from typing import Any, Callable

from gevent.hub import Waiter
from gevent.threadpool import ThreadPool

from base.config import Config
from base.handoff import HubInbox

log = logging.getLogger("greenfront.pool")

_STOP = None


class Skipped(Exception):
    """The work was cancelled before a thread picked it up; it never ran."""


class RequestPool:
    """``size`` native threads running calls handed over from the HTTP hub.

    Args:
        size: number of threads.
        nice: niceness the threads take (0: the process's). Tokenizing threads then yield a
            contended core to the HTTP hub and the engine-I/O thread at once.
    """

    def __init__(self, size: int, nice: int = 0) -> None:
        self.size = size
        self.nice = nice
        self._queue: Any = _queue.SimpleQueue()
        self._inbox: HubInbox[tuple[Waiter, Any, BaseException | None]] = HubInbox(
            _deliver_all)
        self._threads = ThreadPool(size)
        for _ in range(size):
            self._threads.spawn(self._serve)

    def apply(self, fn: Callable[..., Any], args: tuple = (),
              cancelled: Callable[[], bool] | None = None) -> Any:
        """HTTP hub: run ``fn(*args)`` on a pool thread and wait (this greenlet only) for it.

        Raises what ``fn`` raised, or ``Skipped`` when ``cancelled()`` was true before a thread
        started it.
        """
        waiter = Waiter()
        self._queue.put((fn, args, cancelled, waiter))
        return waiter.get()

    def _serve(self) -> None:
        """Pool thread: run queued calls until told to stop."""
        if self.nice:
            _lower_priority(self.nice)
        get, post = self._queue.get, self._inbox.post
        while True:
            item = get()
            if item is _STOP:
                return
            fn, args, cancelled, waiter = item
            if cancelled is not None and cancelled():
                post((waiter, None, Skipped()))
                continue
            try:
                value = fn(*args)
            except BaseException as exc:  # handed to the waiting greenlet, never lost here
                post((waiter, None, exc))
            else:
                post((waiter, value, None))
            del item, fn, args, waiter

    def shutdown(self) -> None:
        """Stop the threads once they finish what they run; never waits for them. The hand-off
        stays open: a call still running may deliver its result to a greenlet that waits."""
        for _ in range(self.size):
            self._queue.put(_STOP)


def _lower_priority(nice: int) -> None:
    """This thread only (Linux threads have their own niceness).

    PERF: two tokenizing pool threads, the HTTP hub and the engine-I/O thread share 2 cores with
    the load; at equal niceness the hub waited for time slices behind them (/health p99 under
    long prompts 43.6 ms, 29 ms with the pool at niceness 10: make bench --quick). A nicer pool
    still has the cores whenever the hub is idle.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError as exc:
        log.warning("could not lower the request pool's priority: %s", exc)


def _deliver_all(results: list[tuple[Waiter, Any, BaseException | None]]) -> None:
    """HTTP hub, the hand-off's handler: switch into each waiting greenlet with its result.

    A ``Waiter`` switched from the hub resumes its greenlet at once (until it next blocks), where
    an ``AsyncResult`` would queue a loop callback to do it, after a closure per result.
    PERF: CPU per hop (``apply`` of a no-op 20k times from one greenlet, 6 runs each): process
    14.0-18.5 µs with ``AsyncResult``, 10.4-10.9 µs with ``Waiter``; the HTTP hub's share
    7.1-9.5 µs against 5.0-5.2 µs.
    """
    for waiter, value, exc in results:
        try:
            if exc is None:
                waiter.switch(value)
            else:
                waiter.throw(exc)
        except Exception:  # never drop the rest of the batch
            log.exception("handing a pool result to its greenlet failed")


_pool: RequestPool | None = None
_pool_pid: int | None = None


def get_pool(config: Config) -> RequestPool:
    """The process's request pool, created on first use in this process (from its HTTP hub)."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        # NOTE: docs/architecture.md §5.1: with the default 5 ms switch interval a Python-heavy pool
        # thread (jinja2) holds the HTTP hub for up to 5 ms at a time.
        if config.switch_interval > 0:
            sys.setswitchinterval(config.switch_interval)
        _pool = RequestPool(config.request_threads, config.pool_nice)
        _pool_pid = os.getpid()
    return _pool


def shutdown_pool() -> None:
    """Stop accepting work without waiting for running tasks (shutdown never blocks on a pool)."""
    global _pool
    if _pool is not None and _pool_pid == os.getpid():
        _pool.shutdown()
    _pool = None
