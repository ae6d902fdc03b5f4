"""Where an engine output lands in the HTTP hub: per-request streams and the waker they share.

The engine-I/O thread demultiplexes each ``EngineCoreOutputs`` batch by request id and hands the
pieces to the HTTP hub (``runtime.handoff``); there ``RequestStream.deliver`` queues the output and
wakes the one greenlet that writes that HTTP response. Several streams (n > 1, prompt lists) can
share one ``Waker`` so a response waits on one event.

Runs on: created in a pool thread (or the HTTP hub); delivered to and consumed in the HTTP hub.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable

import gevent.event

from errors import ApiError


class Waker:
    """One hub-local event shared by the streams of one HTTP response.

    The event is made lazily, inside the HTTP hub, on first use: gevent events belong to the hub
    that first waits on them.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: gevent.event.Event | None = None

    def _get(self) -> gevent.event.Event:
        if self._event is None:
            self._event = gevent.event.Event()
        return self._event

    def wake(self) -> None:
        self._get().set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block this greenlet until woken (or timeout); re-arms for the next wait."""
        event = self._get()
        woken = event.wait(timeout)
        event.clear()
        return bool(woken)


class RequestStream:
    """The outputs of one engine request, in arrival order.

    Attributes:
        request_id: the internal (engine) request id.
        engine_rank: the DP rank the request was sent to.
        finished: True once an output with a finish reason, or an error, was delivered.
        error: the ApiError that ended the stream early (engine death, send failure), if any.
    """

    __slots__ = ("request_id", "engine_rank", "finished", "error", "_outputs", "_waker",
                 "_abort")

    def __init__(self, request_id: str, engine_rank: int, waker: Waker,
                 abort: Callable[[list[str]], None]) -> None:
        self.request_id = request_id
        self.engine_rank = engine_rank
        self.finished = False
        self.error: ApiError | None = None
        self._outputs: deque[Any] = deque()
        self._waker = waker
        self._abort = abort

    # -- HTTP hub: called by the engine client's dispatch ------------------------------------
    def deliver(self, output: Any, frames: list | None = None) -> None:
        """Queue one output; ``frames`` are the message's aux frames when it has any (logprob
        arrays of 256 bytes or more travel in their own ZMQ frames)."""
        self._outputs.append((output, frames))
        if output.finish_reason is not None:
            self.finished = True
        self._waker.wake()

    def fail(self, error: ApiError) -> None:
        if not self.finished:
            self.error = error
            self.finished = True
            self._waker.wake()

    # -- HTTP hub: the response writer ----------------------------------------------------------
    def take(self) -> list[tuple[Any, list | None]]:
        """Every (output, frames) pair that arrived since the last call."""
        outputs = self._outputs
        if not outputs:
            return []
        taken = list(outputs)
        outputs.clear()
        return taken

    def abort(self) -> None:
        """Stop the engine working on this request (idempotent; no-op once finished)."""
        if not self.finished:
            self.finished = True
            self._abort([self.request_id])
