"""``vllm:lora_requests_info``: which LoRA adapters have requests waiting and running.

As vLLM 0.32's frontend keeps it (its LoRARequestStates): a request naming an adapter is
*waiting* from its QUEUED event (and again after a PREEMPTED one), *running* from its SCHEDULED
event, and leaves when it finishes or is aborted. On each scheduler-stats update the series
labelled ``max_lora`` (the engines' ``max_loras``), ``waiting_lora_adapters`` and
``running_lora_adapters`` is set to the current time. Both adapter labels list every adapter
with any request in flight, comma-joined in the order the adapters were first tracked: vLLM
fills both of its per-adapter maps for every tracked adapter, counts of 0 included, and joins
the maps' keys. An aborted request leaves at the next stats update (vLLM: at the abort), which
only matters to the order when its adapter is emptied and used again in between.

A worker sees its own requests only: with several workers (or DP ranks) the series are
per worker, as with vLLM's several API servers, whose logger warns about the same.

Owning thread: the engine-I/O thread (every method; the gauges are written through its
``Batch``).
"""
from __future__ import annotations

import time
from typing import Any

from engine.protocol import EngineCoreEventType
from runtime.metrics.local import Batch, LocalGauge

#: The events from which vLLM tracks a request (QUEUED, PREEMPTED: waiting; SCHEDULED: running).
_TRACKED = frozenset(int(e) for e in (EngineCoreEventType.QUEUED, EngineCoreEventType.SCHEDULED,
                                      EngineCoreEventType.PREEMPTED))


class LoraRequests:
    """Per adapter name, its requests in flight (their ``RequestStream``s), and the gauge.

    Waiting and running need no separate sets: both labels list the same adapters. An aborted
    or failed stream is known by its ``finished`` flag, which the HTTP hub sets (one attribute
    store; this thread only reads it)."""

    def __init__(self, family: Any, max_loras: int, batch: Batch) -> None:
        self._family = family
        self._max_lora = str(max_loras)
        self._batch = batch
        self._adapters: dict[str, set[Any]] = {}  # insertion-ordered: the labels' order
        self._series: dict[str, LocalGauge] = {}  # by the adapters label

    def on_output(self, lora_name: str, stream: Any, output: Any) -> None:
        """One engine output of a request naming ``lora_name``: its events, then its end."""
        if output.finish_reason is None:
            if output.events and any(e.type in _TRACKED for e in output.events):
                self._adapters.setdefault(lora_name, set()).add(stream)
        else:
            self._forget(lora_name, stream)

    def on_stats(self) -> None:
        """A scheduler-stats update: drop the aborted requests, stamp the current series."""
        for name in list(self._adapters):
            requests = self._adapters[name]
            for stream in [s for s in requests if s.finished]:
                self._forget(name, stream)
        names = ",".join(self._adapters)
        gauge = self._series.get(names)
        if gauge is None:
            child = self._family.labels(self._max_lora, names, names)
            gauge = self._series[names] = self._batch.gauge(child)
        gauge.set(time.time())

    def _forget(self, lora_name: str, stream: Any) -> None:
        requests = self._adapters.get(lora_name)
        if requests is not None:
            requests.discard(stream)
            if not requests:
                del self._adapters[lora_name]
