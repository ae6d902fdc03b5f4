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


#: A request body up to this size is light work (``RequestPool.apply``'s ``light``): a short
#: prompt's parse, template and tokenization, bounded at a few ms even with a chat template.
LIGHT_BODY_BYTES = 16 * 1024


class RequestPool:
    """``size`` native threads running calls handed over from the HTTP hub, and, when the pool
    runs at a niceness of its own, ``size`` more for light work at the process's niceness.

    Args:
        size: number of threads per lane.
        nice: niceness the heavy lane's threads take (0: the process's, and one lane only).
            Tokenizing threads then yield a contended core to the HTTP hub and the engine-I/O
            thread at once.

    Why two lanes: a nice thread is the last to get a contended core, which is what a 300k-
    character prompt's tokenizing should be, but not a short prompt's: under 1,024 streams on
    a saturated machine each new stream's request work waited behind everything else for a
    time slice. Light work (a body up to ``LIGHT_BODY_BYTES``) runs on threads at the
    process's niceness. A thread cannot move between the two: an unprivileged thread may raise
    its niceness but never lower it again. PERF (``python -m bench --scenarios stream
    --workers 2``, alternated, bench/RESULTS.md §6.2.4): one nice lane gave TTFT p50 109 / 118
    ms, the light work at niceness 0 93 / 101 ms; with the whole pool at niceness 0, /health p99
    under long prompts was 16-23 ms against 8.0-8.6 ms (``--scenarios long``, three rounds).
    """

    def __init__(self, size: int, nice: int = 0) -> None:
        self.size = size
        self.nice = nice
        self._queue: Any = _queue.SimpleQueue()
        self._light: Any = _queue.SimpleQueue() if nice else self._queue
        self._inbox: HubInbox[tuple[Waiter, Any, BaseException | None]] = HubInbox(
            _deliver_all)
        lanes = [(self._queue, nice)] + ([(self._light, 0)] if nice else [])
        self._threads = ThreadPool(size * len(lanes))
        for queue, lane_nice in lanes:
            for _ in range(size):
                self._threads.spawn(self._serve, queue, lane_nice)

    def apply(self, fn: Callable[..., Any], args: tuple = (),
              cancelled: Callable[[], bool] | None = None, light: bool = False) -> Any:
        """HTTP hub: run ``fn(*args)`` on a pool thread and wait (this greenlet only) for it;
        ``light`` work (bounded by a small input) takes the threads at the process's niceness.

        Raises what ``fn`` raised, or ``Skipped`` when ``cancelled()`` was true before a thread
        started it.
        """
        waiter = Waiter()
        (self._light if light else self._queue).put((fn, args, cancelled, waiter))
        return waiter.get()

    def _serve(self, queue: Any, nice: int) -> None:
        """Pool thread: run calls from ``queue`` until told to stop."""
        if nice:
            _lower_priority(nice)
        get, post = queue.get, self._inbox.post
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
        for queue in {id(self._queue): self._queue, id(self._light): self._light}.values():
            for _ in range(self.size):
                queue.put(_STOP)


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
