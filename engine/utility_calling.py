"""Utility calls to the engines (``utility``): the part of ``engine.client.EngineClient`` that
sends one and waits for its answer.

A mixin of ``EngineClient`` (kept apart for size): it uses the client's call table
(``_calls``, owned by the HTTP hub), its liveness watch, transport and engine-I/O thread.

Runs on: the HTTP hub (the wait); the sends on the engine-I/O thread.
"""
from __future__ import annotations

from typing import Any

import gevent

from base.errors import ServerError
from engine import protocol
from engine.protocol import identity_for_rank as identity


class UtilityCalling:
    """``utility``/``_call_utility`` over the attributes ``EngineClient`` sets."""

    ranks: list[int]
    client_index: int
    _calls: Any
    _liveness: Any
    _transport: Any
    _thread: Any

    def utility(self, method: str, args: list | tuple = (), rank: int | None = None,
                timeout: float | None = 60.0) -> Any:
        """HTTP hub: call an engine utility method and wait for its result. A call without a
        timeout (sleep, LoRA loads, collective RPCs) may keep the engine busy for long: its
        rank's stall watch is suspended meanwhile."""
        rank = self.ranks[0] if rank is None else rank
        self.check_available(rank)
        return self._call_utility(method, args, rank, timeout)

    def _call_utility(self, method: str, args: Any, rank: int, timeout: float | None) -> Any:
        call_id, result = self._calls.open()
        frames = protocol.encode_utility(identity(rank), self.client_index, call_id, method,
                                         list(args))
        unbounded = timeout is None

        def send() -> None:
            if unbounded:
                self._liveness.suspend(rank, +1)
            self._transport.post(frames)
        self._call_engine(send)
        try:
            return result.get(timeout=timeout)
        except gevent.Timeout:
            raise ServerError(f"The engine did not answer `{method}` within {timeout:g} s.")
        finally:
            self._calls.close(call_id)
            if unbounded and self._thread is not None:
                self._call_engine(lambda: self._liveness.suspend(rank, -1))
