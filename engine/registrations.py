"""The engines' registrations (their ready messages) as one engine client knows them: which
expected ranks registered, and the context length they allow together.

Owning thread: the HTTP hub (the engine-I/O thread decodes a registration and posts it here).
"""
from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("greenfront.engine")


class Registrations:
    """The registrations of ``ranks``; ``max_model_len_cap`` lowers the engines' length."""

    def __init__(self, ranks: list[int], max_model_len_cap: int | None) -> None:
        self.ranks = ranks
        self._cap = max_model_len_cap
        self.by_rank: dict[int, Any] = {}

    def add(self, rank: int, registration: Any) -> bool:
        """Record ``rank``'s registration; whether every expected rank has registered now."""
        if rank not in self.ranks:
            log.warning("ignoring a registration from unexpected engine rank %d", rank)
            return False
        known = self.by_rank.get(rank)
        self.by_rank[rank] = registration
        if known != registration:  # read from the shared file first, then sent live: log once
            log.info("engine %d registered (max_model_len=%d)", rank, registration.max_model_len)
        return all(r in self.by_rank for r in self.ranks)

    @property
    def max_model_len(self) -> int:
        """The shortest context length of the registered engines and the cap."""
        lens = [self.by_rank[r].max_model_len for r in self.ranks]
        if self._cap:
            lens.append(self._cap)
        return min(lens)


def speaks_033(registration: Any) -> bool:
    """Whether an engine registered as vLLM 0.33 or later (docs/vllm-versions.md): what
    greenfront does differently for it (pause, DP wake-up) hangs on this."""
    parts = str(getattr(registration, "vllm_version", "")).split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= (0, 33)
    except (ValueError, IndexError):
        return False  # a version we cannot read: keep 0.32's behaviour
