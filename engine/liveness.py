"""Is each engine still speaking? Silence with work in flight, or an unanswered ping, is a stall.

An engine sends nothing while it runs a long step (vLLM sends outputs only for steps that bring
tokens; a chunked prefill brings none until its last chunk), and nothing for this client while
its requests wait behind other clients' in the engine's queue. So after ``ping_after`` seconds
of silence the client sends a cheap utility call (``is_sleeping``); a live engine answers it
between two steps. A rank is stalled when it has said nothing for ``timeout`` seconds while this
client had requests in flight on it, or left a ping unanswered that long. Anything it says
afterwards takes it back.

Runs on: the engine-I/O thread (every method). ``stalled`` and ``silent_since`` are published
for other threads: each is replaced whole, never mutated.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from base.errors import EngineStalled


@dataclass
class _Rank:
    last_heard: float
    busy_since: float = 0.0
    ping_sent: float | None = None
    stalled: bool = False
    suspended: int = 0  # utility calls without a bound in progress (sleep, LoRA load, …)


class Liveness:
    """Per-rank silence bookkeeping.

    Args:
        ranks: the DP ranks watched.
        timeout: seconds of silence that make a stall (0: never).
        now: the engine thread's clock (monotonic seconds).

    Attributes:
        stalled: published frozenset of the stalled ranks.
        silent_since: published {rank: time it was last heard} of the stalled ranks.
    """

    def __init__(self, ranks: Iterable[int], timeout: float, now: float) -> None:
        self.timeout = timeout
        # A ping after a third of the timeout (at most 5 s) leaves two thirds for the engine to
        # finish its current step and answer.
        self.ping_after = min(timeout / 3, 5.0)
        self._ranks = {rank: _Rank(last_heard=now) for rank in ranks}
        self.stalled: frozenset[int] = frozenset()
        self.silent_since: dict[int, float] = {}

    @property
    def enabled(self) -> bool:
        return self.timeout > 0

    def heard(self, rank: int, now: float) -> bool:
        """The engine said something; True when that ends a stall."""
        state = self._ranks.get(rank)
        if state is None:
            return False
        state.last_heard = now
        state.ping_sent = None
        if not state.stalled:
            return False
        state.stalled = False
        self._publish()
        return True

    def became_busy(self, rank: int, now: float) -> None:
        """The first request in flight on an idle rank: its silence counts from now."""
        self._ranks[rank].busy_since = now

    def suspend(self, rank: int, delta: int) -> None:
        """+1/-1 around a utility call that may legitimately keep the engine busy for long."""
        state = self._ranks.get(rank)
        if state is not None:
            state.suspended = max(0, state.suspended + delta)
            state.last_heard = max(state.last_heard, state.busy_since)

    def check(self, now: float, outstanding: Callable[[int], int]) -> tuple[list[int], list[int]]:
        """(ranks to ping now, ranks that became stalled now)."""
        to_ping, newly = [], []
        for rank, state in self._ranks.items():
            if state.suspended:
                continue
            busy = outstanding(rank) > 0
            silent_for = now - max(state.last_heard, state.busy_since if busy else 0.0)
            if state.ping_sent is None and now - state.last_heard >= self.ping_after:
                state.ping_sent = now
                to_ping.append(rank)
            if state.stalled:
                continue
            unanswered = state.ping_sent is not None and now - state.ping_sent >= self.timeout
            if (busy and silent_for >= self.timeout) or unanswered:
                state.stalled = True
                newly.append(rank)
        if newly:
            self._publish()
        return to_ping, newly

    def longest_silence(self, now: float) -> float:
        """Any thread: seconds the longest-stalled rank has been silent (0: none stalled)."""
        since = self.silent_since
        return now - min(since.values()) if since else 0.0

    def refusal(self, rank: int | None, now: float) -> EngineStalled | None:
        """Any thread: the 503 for a request pinned to ``rank`` (or to any rank: None), or None
        while it can be served."""
        stalled = self.stalled
        if not stalled or (rank is None and len(stalled) < len(self._ranks)):
            return None
        if rank is not None and rank not in stalled:
            return None
        silent = self.silent_since
        ranks = [rank] if rank is not None else sorted(stalled)
        since = min(silent.get(r, now) for r in ranks)
        which = f"engine {ranks[0]}" if len(ranks) == 1 else "every engine"
        return EngineStalled(f"The engine core is stalled: {which} has not answered for "
                             f"{now - since:.0f} s; retry later.")

    def _publish(self) -> None:
        stalled = {rank: s.last_heard for rank, s in self._ranks.items() if s.stalled}
        self.silent_since = stalled
        self.stalled = frozenset(stalled)
