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
        # (time taken, lag) pairs of the last WINDOW_SECONDS. The window is by time, not by a
        # count of samples: a lagging hub takes longer than ``interval`` per sample, and a
        # count-sized window then stretched past a second (seen at load average 8).
        self._samples: deque[tuple[float, float]] = deque()
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
        now = time.monotonic()
        self._forget_before(now - WINDOW_SECONDS)
        overdue = now - self._due if self._greenlet is not None else 0.0
        return max(self._window_max(), overdue)

    def _forget_before(self, cutoff: float) -> None:
        while self._samples and self._samples[0][0] < cutoff:
            self._samples.popleft()

    def _window_max(self) -> float:
        return max((lag for _, lag in self._samples), default=0.0)

    def _run(self) -> None:
        while True:
            self._due = time.monotonic() + self.interval
            gevent.sleep(self.interval)
            now = time.monotonic()
            lag = max(0.0, now - self._due)
            self._samples.append((now, lag))
            self._forget_before(now - WINDOW_SECONDS)
            if self._on_sample is not None:
                self._on_sample(lag, self._window_max())
