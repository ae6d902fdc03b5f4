"""Which requests are in flight on which engine, and where the next one goes.

Owned by the engine-I/O thread: every method runs there. ``EngineClient`` hands submits, aborts
and failures to that thread through its inbox, so counts are updated by one thread only (a
``+=`` on a dict item is several bytecodes; two threads doing it lose updates). Other threads
read only ``in_flight`` and ``prefill_tokens``, ints this thread republishes after every change
(one attribute store, atomic for readers); ``on_change`` sees both after each change.

Runs on: the engine-I/O thread (``in_flight`` is read from any thread).
"""
from __future__ import annotations

from typing import Callable, Collection, Iterable

from engine.stream import RequestStream


class RequestRegistry:
    """The streams of in-flight requests by internal request id, and counts per DP rank.

    Attributes:
        in_flight: published count of registered requests (read by ``/load`` in the HTTP hub).
        prefill_tokens: prompt tokens of registered requests without an output yet.
        load: the DP coordinator's latest per-rank ``[waiting, running, kv_usage]``.
    """

    def __init__(self, ranks: Iterable[int],
                 on_change: Callable[[int, int], None] | None = None) -> None:
        self.ranks = list(ranks)
        self._on_change = on_change
        self.prefill_tokens = 0
        self._streams: dict[str, RequestStream] = {}
        self._outstanding: dict[int, int] = {rank: 0 for rank in self.ranks}
        self._next = 0
        self.load: dict[int, list] = {}
        self.in_flight = 0

    def outstanding(self, rank: int) -> int:
        return self._outstanding[rank]

    def choose(self, avoid: Collection[int] = ()) -> int | None:
        """The least-loaded rank not in ``avoid`` (ties rotate), or None when all are avoided."""
        ranks = self.ranks
        if len(ranks) == 1:
            return None if ranks[0] in avoid else ranks[0]
        start = self._next % len(ranks)
        self._next += 1
        rotated = [r for r in ranks[start:] + ranks[:start] if r not in avoid]
        if not rotated:
            return None
        rank = min(rotated, key=self._score)
        load = self.load.get(rank)
        if load is not None:
            load[0] += 1  # counts as waiting there until the coordinator's next update
        return rank

    def _score(self, rank: int) -> float:
        """vLLM's DP load score: own in-flight requests, refined by the coordinator's counts."""
        mine = self._outstanding[rank]
        load = self.load.get(rank)
        if load is None:
            return mine
        waiting, running, kv_usage = load[0], load[1], load[2]
        return max(mine, waiting + running) + waiting * 6 * max(0.0, kv_usage - 0.5)

    def add(self, stream: RequestStream, rank: int) -> bool:
        """Register ``stream`` on ``rank``; True when the rank had nothing in flight before."""
        stream.engine_rank = rank
        self._streams[stream.request_id] = stream
        was_idle = self._outstanding[rank] == 0
        self._outstanding[rank] += 1
        self.in_flight = len(self._streams)
        self.prefill_tokens += stream.prefill_tokens
        self._changed()
        return was_idle

    def prefilled(self, stream: RequestStream) -> None:
        """``stream``'s first output arrived: its prompt no longer waits for prefill."""
        if stream.prefill_tokens:
            self.prefill_tokens -= stream.prefill_tokens
            stream.prefill_tokens = 0
            self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self.in_flight, self.prefill_tokens)

    def get(self, request_id: str) -> RequestStream | None:
        return self._streams.get(request_id)

    def pop(self, request_id: str) -> RequestStream | None:
        """Forget one request (finished, aborted or failed); None if it was not registered."""
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            self._outstanding[stream.engine_rank] -= 1
            self.in_flight = len(self._streams)
            self.prefill_tokens -= stream.prefill_tokens
            self._changed()
        return stream

    def pop_external(self, external_ids: Collection[str]) -> list[RequestStream]:
        """Forget every request whose external id (the internal id without its random suffix;
        an ``n``-sample request's ``<i>_<id>`` too) is in ``external_ids``; their streams."""
        wanted = set(external_ids)
        streams = [s for rid, s in self._streams.items() if _external(rid) in wanted]
        for stream in streams:
            self.pop(stream.request_id)
        return streams

    def pop_rank(self, rank: int) -> list[RequestStream]:
        """Forget every request in flight on ``rank`` and return their streams."""
        streams = [s for s in self._streams.values() if s.engine_rank == rank]
        for stream in streams:
            self.pop(stream.request_id)
        return streams

    def pop_all(self) -> list[RequestStream]:
        streams = list(self._streams.values())
        self._streams.clear()
        for rank in self._outstanding:
            self._outstanding[rank] = 0
        self.in_flight = 0
        self.prefill_tokens = 0
        self._changed()
        return streams


def _external(request_id: str) -> str:
    """``<external>-<suffix>`` → ``<external>``, with an ``n``-sample prefix ``<i>_`` removed
    (vLLM aborts a parent request's samples by the parent's external id)."""
    external = request_id.rpartition("-")[0]
    head, sep, rest = external.partition("_")
    return rest if sep and head.isdigit() else external
