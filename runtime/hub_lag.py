"""The HTTP hub's lag monitor: a timer that measures how late it fires.

Every ``interval`` seconds a greenlet in the HTTP hub sleeps and, on waking, records how much
later than asked it woke up. The lateness is what any callback queued in the hub waits at that
moment (a probe's read, a stream's wake-up): a hub busy with request work, a GIL held by other
threads or a CPU shared with other processes all show up here. ``/ready`` turns not-ready when the
recent lag is over a threshold, and the lag is exported as ``greenfront:hub_lag_seconds``.

Runs on: the HTTP hub (the monitor greenlet and every reader).
"""
from __future__ import annotations

import time
from collections import deque
from typing import Callable

import gevent

#: Seconds of samples ``recent`` looks back over: one late tick (a GC pause) is seen for a
#: second, not for one 100 ms sample only, so a probe every few seconds can still catch it.
WINDOW_SECONDS = 1.0


class HubLagMonitor:
    """Samples the hub's lateness every ``interval`` seconds.

    Args:
        interval: seconds between samples (GREENFRONT_HUB_LAG_INTERVAL).
        on_sample: called in the hub after each sample with it and the window's maximum (the
            metrics).
    """

    def __init__(self, interval: float, on_sample: Callable[[float, float], None] | None = None) -> None:
        self.interval = interval
        self._on_sample = on_sample
        self._samples: deque[float] = deque(maxlen=max(1, round(WINDOW_SECONDS / interval)))
        self._due = 0.0
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        if self._greenlet is None:
            self._due = time.monotonic() + self.interval
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    @property
    def running(self) -> bool:
        return self._greenlet is not None

    def recent(self) -> float:
        """The largest lag of the last second, or how overdue the next sample already is."""
        overdue = time.monotonic() - self._due if self._greenlet is not None else 0.0
        return max(max(self._samples, default=0.0), overdue)

    def _run(self) -> None:
        while True:
            self._due = time.monotonic() + self.interval
            gevent.sleep(self.interval)
            lag = max(0.0, time.monotonic() - self._due)
            self._samples.append(lag)
            if self._on_sample is not None:
                self._on_sample(lag, max(self._samples))
