"""Utility calls in flight to the engines: the hub's calls waiting for a result, and the liveness
pings, which share one call-id space so that an answer tells which of them it ends.

A hub call's id carries this worker's slot (``call_id % worker_count == worker_slot``), which is
how the relay (``engine.relay``) routes the answer when the workers share one engine client;
pings are counted from far above them, so the two never meet.

Owning thread: the HTTP hub owns the calls waiting for a result (``open``, ``close``,
``finish``, ``fail_all``); the engine-I/O thread owns the pings (``ping``, ``is_ping``).
"""
from __future__ import annotations

import itertools
from typing import Any

import gevent.event

from base.errors import ApiError, ServerError

#: Call ids of the liveness pings: far above the hub's utility call ids (counted from 1).
_PING_CALL_IDS = 1 << 48
#: The utility a ping calls: cheap, side-effect free, answered by vLLM 0.32 and the simulator.
PING_METHOD = "is_sleeping"


class UtilityCalls:
    """The calls of one engine client (``worker_slot`` among ``worker_count`` workers)."""

    def __init__(self, worker_slot: int, worker_count: int) -> None:
        self._slot, self._workers = worker_slot, worker_count
        self._waiting: dict[int, gevent.event.AsyncResult] = {}
        self._call_ids = itertools.count(1)
        self._pings: dict[int, int] = {}  # ping call id -> rank
        self._ping_ids = itertools.count(_PING_CALL_IDS)

    # -- HTTP hub ---------------------------------------------------------------------------
    def open(self) -> tuple[int, gevent.event.AsyncResult]:
        """A new call's id and the result its answer will set."""
        call_id = next(self._call_ids) * self._workers + self._slot
        result = gevent.event.AsyncResult()
        self._waiting[call_id] = result
        return call_id, result

    def close(self, call_id: int) -> None:
        """The caller stopped waiting (answered, timed out or failed)."""
        self._waiting.pop(call_id, None)

    def finish(self, utility: Any) -> None:
        """An engine's ``UtilityOutput``: set its call's result or failure."""
        call = self._waiting.get(utility.call_id)
        if call is None:
            return
        if utility.failure_message is not None:
            call.set_exception(ServerError(utility.failure_message))
        else:
            call.set(utility.result[1] if utility.result else None)

    def fail_all(self, error: ApiError) -> None:
        """Every waiting call fails with ``error`` (the engines died)."""
        for call in list(self._waiting.values()):
            call.set_exception(error)

    # -- engine-I/O thread ------------------------------------------------------------------
    def ping(self, rank: int) -> int:
        """The call id of a new ping to ``rank``."""
        call_id = next(self._ping_ids)
        self._pings[call_id] = rank
        return call_id

    def is_ping(self, call_id: int) -> bool:
        """Whether ``call_id`` answers a ping (which is then done)."""
        return self._pings.pop(call_id, None) is not None
