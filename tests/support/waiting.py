"""Polling until a condition holds, for tests that watch other threads and processes."""
from __future__ import annotations

import time
from typing import Callable

import gevent


def wait_for(predicate: Callable[[], object], timeout: float = 15.0, *,
             sleep: Callable[[float], None] = time.sleep, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        sleep(interval)
    return False


def wait_in_hub(predicate: Callable[[], object], timeout: float = 30.0) -> bool:
    """``wait_for`` sleeping in gevent, so that this thread's hub runs meanwhile (what other
    threads hand to it, e.g. the engine client's outputs, arrives only then)."""
    return wait_for(predicate, timeout, sleep=gevent.sleep, interval=0.005)
