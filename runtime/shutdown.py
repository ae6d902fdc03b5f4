"""Graceful shutdown of one worker, with vLLM's ``--shutdown-timeout`` semantics.

On SIGTERM (``Drain.begin``) the worker stops serving new requests: ``/ready`` answers 503
(``Readiness.set_draining``) and every new request, on an open keep-alive connection too, gets
a 503 (``middleware.drain``). With a timeout N > 0 the requests already in flight may finish for
N seconds; whatever is still running then is aborted in its engines and answered with a clear
503 error (a JSON error, or an error event ending the stream). With N = 0 that happens at once.
When nothing is in flight the idle keep-alive connections are closed, so gunicorn's worker loop
exits at once instead of waiting out their keep-alive timeout.

``plan`` turns N into the drain window and gunicorn's ``graceful_timeout`` (how long the master
waits for its workers before killing them), for a standalone deployment and for one launched by
``vllm serve``, which kills its frontend ``max(N, 5)`` seconds after SIGTERM.

Owning thread: the HTTP hub (every method; the SIGTERM handler only spawns ``begin``).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

import gevent
import gevent.event

from base.errors import EngineUnavailable

log = logging.getLogger("greenfront.shutdown")

#: vLLM's multi-process launcher waits at least this long for its frontend after SIGTERM.
VLLM_MIN_FRONTEND_WAIT = 5.0
#: What aborting, answering the aborted requests and leaving gunicorn's worker loop (it looks
#: once a second) take after the drain window, measured well under 2 s on 2 loaded cores.
EXIT_MARGIN = 2.0
#: How long the aborted requests' answers may take to be written before connections close.
ANSWER_WAIT = 2.0
#: Under ``vllm serve`` a shutdown timeout of 0 still waits this long before aborting: vLLM's
#: launcher also SIGTERMs its frontend when an engine dies, and its signal arrived 10 ms before
#: the engine's lost connection reached the workers (make interop's engine-death test); the
#: requests in flight must get vLLM's engine-failure 500, not the drain's 503.
ENGINE_DEATH_GRACE = 0.5


class ShuttingDown(EngineUnavailable):
    """503 for work refused or aborted because the server is shutting down."""


def plan(timeout: float, launched: bool) -> tuple[float, float]:
    """(drain window, gunicorn graceful_timeout) for ``--shutdown-timeout`` ``timeout``.

    Standalone the window is the timeout itself. Under ``vllm serve`` the frontend is killed
    ``max(timeout, 5)`` seconds after SIGTERM, so the window leaves ``EXIT_MARGIN`` of that for
    aborting and exiting: a timeout of 7 or more gives in-flight requests 2 s less than asked.
    """
    if not launched:
        return timeout, timeout + EXIT_MARGIN + 1.0
    budget = max(timeout, VLLM_MIN_FRONTEND_WAIT)
    window = max(0.0, min(timeout, budget - EXIT_MARGIN))
    return window, budget - 1.0


class Drain:
    """The shutdown state of one worker.

    Args:
        window: seconds in-flight requests may run after SIGTERM (0: abort them at once, or
            after ``ENGINE_DEATH_GRACE`` with ``launched``).
        launched: started by ``vllm serve``.
        abort_all: aborts every engine request of this worker, failing its stream with the
            given error (``EngineClient.abort_all``); None before the engines are known.
        on_draining: called once when the drain begins (readiness goes to 503).
        close_idle: closes the idle keep-alive connections (``GreenfrontWorker.close_idle``).
    """

    def __init__(self, window: float, abort_all: Callable[[Exception], None] | None = None,
                 on_draining: Callable[[], None] | None = None,
                 close_idle: Callable[[], None] | None = None, launched: bool = False) -> None:
        self.window = window
        self.launched = launched
        self.abort_all = abort_all
        self.on_draining = on_draining
        self.close_idle = close_idle
        self.draining = False
        self.active = 0
        self._idle = gevent.event.Event()
        self._idle.set()

    # -- the request accounting (middleware.drain) -------------------------------------------
    def enter(self) -> None:
        self.active += 1
        self._idle.clear()

    def leave(self) -> None:
        self.active -= 1
        if self.active <= 0:
            self.active = 0
            self._idle.set()

    def refusal(self) -> ShuttingDown:
        return ShuttingDown("The server is shutting down and takes no new requests; retry on "
                            "another instance.")

    # -- the drain ----------------------------------------------------------------------------
    def begin(self) -> None:
        """Start draining (idempotent); returns once the drain is over."""
        if self.draining:
            return
        self.draining = True
        log.info("[shutdown] draining: %d request(s) in flight, shutdown timeout %gs",
                 self.active, self.window)
        if self.on_draining is not None:
            self.on_draining()
        started = time.monotonic()
        if self.window > 0:
            self._idle.wait(self.window)
        elif self.launched:
            self._idle.wait(ENGINE_DEATH_GRACE)
        if self.active:
            log.warning("[shutdown] aborting %d request(s) still in flight after %.1fs",
                        self.active, time.monotonic() - started)
            self._abort()
            self._idle.wait(ANSWER_WAIT)
        log.info("[shutdown] requests done after %.1fs; closing idle connections",
                 time.monotonic() - started)
        if self.close_idle is not None:
            self.close_idle()

    def answer_in_flight(self, error: Exception | None) -> None:
        """Before the worker halts (its engine died, a ``--lora-modules`` module did not load):
        end every request in flight with ``error`` (None: the engine client ended them) and
        wait until their answers are written (at most ``ANSWER_WAIT``)."""
        if error is not None and self.abort_all is not None:
            self.abort_all(error)
        if self.active:
            log.info("halting: answering %d request(s) in flight first", self.active)
        self._idle.wait(ANSWER_WAIT)

    def _abort(self) -> None:
        if self.abort_all is None:
            return
        if self.window > 0:
            message = (f"The server is shutting down: the request did not finish within the "
                       f"shutdown timeout ({self.window:g}s) and was aborted.")
        else:
            message = "The server is shutting down (shutdown timeout 0): the request was aborted."
        self.abort_all(ShuttingDown(message))

    @classmethod
    def for_worker(cls, config: Any, state: Any,
                   close_idle: Callable[[], None] | None = None) -> "Drain":
        """The drain of a worker serving ``state`` (a ``WorkerState``) with ``config``."""
        launched = config.engine_mode == "launched"
        window, _ = plan(config.shutdown_timeout, launched)

        def abort_all(error: Exception) -> None:
            if state.client is not None:
                state.client.abort_all(error)
        return cls(window, abort_all=abort_all, on_draining=state.readiness.set_draining,
                   close_idle=close_idle, launched=launched)

    def start_on_signal(self) -> None:
        """From a signal handler: run ``begin`` in its own greenlet."""
        gevent.spawn(self.begin)
