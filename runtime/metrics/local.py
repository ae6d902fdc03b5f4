"""Metric updates gathered in the updating thread and written to the shared values in batches.

In multiprocess mode every prometheus-client update is a locked write into a memory-mapped file:
4.3 µs per counter ``inc`` and 7.6 µs per histogram ``observe`` on this machine (200k updates,
``PROMETHEUS_MULTIPROC_DIR`` set), against 0.3 µs for the same bucket increment in a Python list.
An inter-token latency per streamed token at 40k tokens/s would cost a third of a core, so the
hot paths count here; ``detach`` takes what is pending as plain values and ``write`` adds them to
the shared values (a few writes per changed series) every ``GREENFRONT_METRICS_FLUSH_INTERVAL``.

Every write to the shared values happens in the HTTP hub: prometheus-client takes one process-wide
lock per write, and under gevent's patching that lock is a gevent lock, which must not be
contended between the hub and a native thread with its own hub (a worker's counts stopped for
good when the engine-I/O thread wrote its own). So the engine-I/O thread ``detach``es its batch
and hands the values to the hub.

Owning thread: each ``Batch`` belongs to the one thread that updates and detaches it (the
engine-I/O thread has one, the HTTP hub another); ``write`` runs in the HTTP hub.

Runs on: its owning thread; ``write`` in the HTTP hub.
"""
from __future__ import annotations

import time
from bisect import bisect_left
from typing import Any


class LocalCounter:
    """A counter child's pending increment."""

    __slots__ = ("_child", "_value", "_batch")

    def __init__(self, child: Any, batch: "Batch") -> None:
        self._child = child
        self._value = 0.0
        self._batch = batch

    def inc(self, amount: float = 1.0) -> None:
        if amount:
            if not self._value:
                self._batch.dirty.append(self)
            self._value += amount

    def detach(self) -> tuple:
        value, self._value = self._value, 0.0
        return (_add_counter, self._child, value)


class LocalHistogram:
    """A histogram (or summary) child's pending observations: bucket counts and their sum.

    Buckets are counted the way prometheus-client counts them (the first bound >= the value).
    """

    __slots__ = ("_child", "_bounds", "_counts", "_count", "_sum", "_batch")

    def __init__(self, child: Any, batch: "Batch") -> None:
        self._child = child
        self._bounds = list(getattr(child, "_upper_bounds", ()))
        self._counts = [0] * len(self._bounds)
        self._count = 0
        self._sum = 0.0
        self._batch = batch

    def observe(self, value: float, times: int = 1) -> None:
        """Count ``value`` ``times`` times (the inter-token gaps of one engine step are mostly
        one and the same value)."""
        if not self._count:
            self._batch.dirty.append(self)
        self._count += times
        self._sum += value * times
        if self._bounds:
            self._counts[bisect_left(self._bounds, value)] += times

    def detach(self) -> tuple:
        pending = (_add_observations, self._child, self._counts, self._count, self._sum)
        self._counts = [0] * len(self._bounds)
        self._count, self._sum = 0, 0.0
        return pending


class LocalGauge:
    """A gauge child's latest value (only the last ``set`` before a write matters) and the time
    it was true.

    The time goes into the write: a ``mostrecent`` gauge shows the worker whose value carries the
    latest timestamp, and the value must be judged by when it was true, not by when its batch was
    flushed nor when a worker happened to read it. Otherwise a worker's last "1 running" from
    before an abort, read or flushed after another worker's "0 running", would win the scrape for
    good (no later stats come to correct it). Engine gauges therefore pass the engine's own step
    time (``at``): the engine stamps its steps in order, whichever worker each one reaches.
    """

    __slots__ = ("_child", "_value", "_at", "_batch")

    def __init__(self, child: Any, batch: "Batch") -> None:
        self._child = child
        self._value: float | None = None
        self._at = 0.0
        self._batch = batch

    def set(self, value: float, at: float | None = None) -> None:
        """``at``: when the value was true, on one clock for every writer of this series
        (default: now, wall clock)."""
        if self._value is None:
            self._batch.dirty.append(self)
        self._value = value
        self._at = time.time() if at is None else at

    def detach(self) -> tuple:
        value, self._value = self._value, None
        return (_set_gauge, self._child, value, self._at)


def _add_counter(child: Any, value: float) -> None:
    child.inc(value)


def _set_gauge(child: Any, value: float, at: float) -> None:
    # NOTE: Gauge.set would stamp the write with the flush time; its value holder takes the
    # time of the set instead (prometheus-client 0.26; tests/unit/runtime/test_metrics_local.py
    # checks that a scrape picks the later set across two processes).
    if child._is_most_recent:
        child._value.set(float(value), timestamp=at)
    else:
        child.set(value)


def _add_observations(child: Any, counts: list[int], count: int, total: float) -> None:
    # NOTE: prometheus-client 0.26's Histogram child keeps one value per bucket (not
    # cumulative) and the sum; a Summary child its count and sum. Checked by
    # tests/unit/runtime/test_metrics_local.py (the scrape equals observe()'s).
    if counts:
        for i, n in enumerate(counts):
            if n:
                child._buckets[i].inc(n)
    else:
        child._count.inc(count)
    child._sum.inc(total)


class Batch:
    """The pending updates of one thread; ``counter``/``histogram``/``gauge`` wrap a child."""

    __slots__ = ("dirty",)

    def __init__(self) -> None:
        self.dirty: list[Any] = []

    def counter(self, child: Any) -> LocalCounter:
        return LocalCounter(child, self)

    def histogram(self, child: Any) -> LocalHistogram:
        return LocalHistogram(child, self)

    def gauge(self, child: Any) -> LocalGauge:
        return LocalGauge(child, self)

    def detach(self) -> list[tuple]:
        """Owning thread: every pending update as plain values; the locals start again at 0."""
        dirty, self.dirty = self.dirty, []
        return [local.detach() for local in dirty]

    def flush(self) -> int:
        """HTTP hub, for the hub's own batch: write what is pending; how many series changed."""
        pending = self.detach()
        write(pending)
        return len(pending)


class PerEngine(dict):
    """Each engine's (DP rank's) series, made on first use: ``make(labels, batch)`` with labels
    ``(model_name, rank)``. Owned by the batch's thread."""

    def __init__(self, make: Any, model_name: str, batch: Batch) -> None:
        super().__init__()
        self._make, self._model, self._batch = make, model_name, batch

    def __missing__(self, rank: int) -> Any:
        series = self[rank] = self._make((self._model, str(rank)), self._batch)
        return series


def write(pending: list[tuple]) -> None:
    """HTTP hub: add detached updates to the shared values."""
    for fn, child, *values in pending:
        fn(child, *values)
