"""Admission limits: vLLM's ``--max-num-queued-reqs`` and ``--max-num-queued-tokens``.

vLLM 0.32's frontend refuses a request with 503 before it reaches an engine when
- ``max_num_queued_reqs``: the unfinished engine requests (waiting or running, a request with
  ``n`` samples counting ``n``) plus this request's would exceed the limit;
- ``max_num_queued_tokens``: the prompt tokens of the requests still in prefill (no output yet)
  already reach the limit (this request's own are not added, as in vLLM).
Each refusal counts in ``vllm:admission_rejections{reason}``. The counts cover the whole
deployment, as vLLM's API servers share theirs: every worker publishes its own in a slot of a
small shared file (``SharedCounts``), and a check adds the other workers' published counts to
this worker's exact ones. Like vLLM's, the cross-worker part is approximate (a slot is as fresh
as its worker's last change).

Owning thread: the engine-I/O thread (``Admission.verdict`` runs in ``EngineClient._add``, one
request group at a time, so a burst cannot pass the check together); ``SharedCounts`` slots are
each written by their worker's engine-I/O thread and read by the others.
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

from base.errors import ApiError

REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")
_SLOT = struct.Struct("<qq")  # in-flight engine requests, prompt tokens still in prefill
MAX_SLOTS = 64
RETRY_AFTER_SECONDS = 1


class AdmissionRejected(ApiError):
    """503 for a request refused by a queue limit (vLLM's ``GracefulHTTPError``s: the status's
    phrase as type, no param), with ``Retry-After`` so that clients back off and retry."""

    status = 503
    type = "Service Unavailable"
    headers = (("Retry-After", str(RETRY_AFTER_SECONDS)),)

    def __init__(self, reason: str) -> None:
        super().__init__(
            "The engine is currently busy and cannot accept new requests. Please try again "
            "later or on a different instance." if reason == REASONS[0] else
            "The engine has reached its prefill token backlog limit. Please try again later "
            "or on a different instance.")
        self.reason = reason


class SharedCounts:
    """One ``(requests, prefill tokens)`` slot per worker in a file every worker maps."""

    def __init__(self, path: str, slot: int) -> None:
        if not 0 <= slot < MAX_SLOTS:
            raise ValueError(f"worker slot {slot} out of range")
        self._slot = slot
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            size = _SLOT.size * MAX_SLOTS
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)  # zero-filled; a restarted worker overwrites its slot
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.publish(0, 0)

    def publish(self, requests: int, tokens: int) -> None:
        _SLOT.pack_into(self._map, self._slot * _SLOT.size, requests, tokens)

    def others(self) -> tuple[int, int]:
        """The other workers' published counts, summed."""
        requests = tokens = 0
        for slot, (r, t) in enumerate(_SLOT.iter_unpack(self._map)):
            if slot != self._slot:
                requests += r
                tokens += t
        return requests, tokens


@dataclass
class Group:
    """The engine requests of one HTTP request (its prompts × ``n``), admitted together: the
    first to reach the engine-I/O thread decides for all of them."""

    requests: int
    prompt_tokens: int
    decided: bool = False
    rejection: AdmissionRejected | None = None


class Admission:
    """The limits of one worker (None: no limit)."""

    def __init__(self, max_requests: int | None, max_tokens: int | None,
                 shared: SharedCounts | None = None) -> None:
        self.max_requests = max_requests
        self.max_tokens = max_tokens
        self._shared = shared

    def verdict(self, group: Group, requests: int, prefill_tokens: int
                ) -> AdmissionRejected | None:
        """The group's rejection, or None; ``requests``/``prefill_tokens``: this worker's own."""
        if not group.decided:
            group.decided = True
            group.rejection = self._check(group.requests, requests, prefill_tokens)
        return group.rejection

    def _check(self, n: int, requests: int, tokens: int) -> AdmissionRejected | None:
        if self._shared is not None:
            other_requests, other_tokens = self._shared.others()
            requests, tokens = requests + other_requests, tokens + other_tokens
        if self.max_requests is not None and requests + n > self.max_requests:
            return AdmissionRejected(REASONS[0])
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return AdmissionRejected(REASONS[1])
        return None

    def publish(self, requests: int, prefill_tokens: int) -> None:
        """Engine-I/O thread: this worker's counts changed."""
        if self._shared is not None:
            self._shared.publish(requests, prefill_tokens)
