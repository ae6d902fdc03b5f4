"""Whether this worker should be sent new requests: the state behind ``/ready``.

``/health`` is liveness (the process serves HTTP and its engines are alive); ``/ready`` is the
stricter question a load balancer or Kubernetes asks before routing to this worker. It is ready
only while all of these hold:

- every expected engine has registered and none is dead (the engine client says so);
- no engine is stalled (the engine client's ``stalled_ranks``: its liveness watch finds them);
- the worker is not draining (``set_draining``: the shutdown path sets it on SIGTERM);
- the HTTP hub is not lagging more than ``max_hub_lag`` seconds (``runtime.hub_lag``).

Owning thread: the HTTP hub reads it (``not_ready_reasons`` from ``/ready``). ``set_draining``
may be called from any thread: it replaces one bool under a lock.

Runs on: the HTTP hub (reads); writers on any thread.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

#: GREENFRONT_READY_MAX_HUB_LAG's default: a hub a whole second late answers its streams and
#: probes a second late; a balancer should prefer another worker.
MAX_HUB_LAG_DEFAULT = 1.0


class Readiness:
    """The readiness state of one worker process.

    Args:
        max_hub_lag: seconds of hub lag above which the worker is not ready (0: never).
        engines: returns the engine client (None before the worker started), read per check.
        hub_lag: returns the recent hub lag in seconds (the monitor's ``recent``), or None.
    """

    def __init__(self, max_hub_lag: float = MAX_HUB_LAG_DEFAULT,
                 engines: Callable[[], Any] | None = None,
                 hub_lag: Callable[[], float] | None = None) -> None:
        self.max_hub_lag = max_hub_lag
        self._engines = engines or (lambda: None)
        self._hub_lag = hub_lag
        self._lock = threading.Lock()
        self._draining = False

    # -- writer (any thread) ----------------------------------------------------------------
    def set_draining(self, draining: bool = True) -> None:
        """The worker stops taking new requests (SIGTERM, graceful shutdown)."""
        with self._lock:
            self._draining = draining

    # -- readers (HTTP hub) -----------------------------------------------------------------
    @property
    def draining(self) -> bool:
        return self._draining

    def not_ready_reasons(self) -> list[str]:
        """Why the worker is not ready; an empty list means it is ready."""
        reasons = []
        client = self._engines()
        if client is None or not client.ready:
            reasons.append("the engines have not registered yet")
        elif client.dead_reason is not None:
            reasons.append(f"the engine core is dead ({client.dead_reason})")
        stalled = getattr(client, "stalled_ranks", None)
        if stalled:
            reasons.append("engine " + ", ".join(str(r) for r in sorted(stalled)) + " stalled")
        if self._draining:
            reasons.append("the server is draining (shutting down)")
        if self._hub_lag is not None and self.max_hub_lag > 0:
            lag = self._hub_lag()
            if lag > self.max_hub_lag:
                reasons.append(f"the HTTP hub is {lag * 1000:.0f} ms late (threshold "
                               f"{self.max_hub_lag * 1000:.0f} ms)")
        return reasons
