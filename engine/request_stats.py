"""The timing of one engine request, as vLLM's frontend keeps it for its metrics.

Made when the request is submitted (its frontend arrival time); filled by the engine-I/O thread
from each output it demultiplexes (engine-clock timestamps of the step messages and of the
QUEUED/SCHEDULED/PREEMPTED events, wall-clock receipt times); read in the HTTP hub once the
request has finished, to record its latencies (``runtime.metrics``).

Owning thread: the engine-I/O thread writes it; the HTTP hub reads it only after the request's
final output was handed over (which happens after the write), so no lock is needed.
"""
from __future__ import annotations


class RequestTiming:
    """Attributes follow vLLM's RequestStateStats: ``arrival`` and ``last_wall`` are wall-clock
    (``time.time``); ``queued``, ``scheduled``, ``first_token`` and ``last_token`` are the engine's
    clock (EngineCoreOutputs and event timestamps)."""

    __slots__ = ("arrival", "lora_name", "queued", "scheduled", "first_token", "last_token",
                 "last_wall", "generated", "preemptions", "cached_tokens", "prefilling")

    def __init__(self, arrival: float, lora_name: str | None = None) -> None:
        self.arrival = arrival
        self.lora_name = lora_name
        self.queued = 0.0
        self.scheduled = 0.0
        self.first_token = 0.0
        self.last_token = 0.0
        self.last_wall = arrival
        self.generated = 0
        self.preemptions = 0
        self.cached_tokens = 0
        self.prefilling = True
