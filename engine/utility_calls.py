"""Utility calls waiting for their engine's reply.

Owning thread: the HTTP hub (``EngineClient.utility`` opens and closes a call; the engine-I/O
thread hands each reply, and engine death, to the hub, which finishes the calls here).
"""
from __future__ import annotations

from typing import Any

import gevent.event

from errors import ApiError, ServerError


class PendingCalls:
    """Call id -> the ``AsyncResult`` its caller waits on."""

    def __init__(self) -> None:
        self._calls: dict[int, gevent.event.AsyncResult] = {}

    def open(self, call_id: int) -> gevent.event.AsyncResult:
        result = gevent.event.AsyncResult()
        self._calls[call_id] = result
        return result

    def close(self, call_id: int) -> None:
        self._calls.pop(call_id, None)

    def finish(self, utility: Any) -> None:
        """A ``UtilityOutput`` arrived: its call returns the value, or fails with the engine's
        message (a reply nobody waits for any more is dropped)."""
        call = self._calls.get(utility.call_id)
        if call is None:
            return
        if utility.failure_message is not None:
            call.set_exception(ServerError(utility.failure_message))
        else:
            call.set(utility.result[1] if utility.result else None)

    def fail_all(self, error: ApiError) -> None:
        for call in list(self._calls.values()):
            call.set_exception(error)
