"""Readiness state (/ready) and the hub-lag monitor, in a real gevent hub."""
from __future__ import annotations

import time
from types import SimpleNamespace

import gevent

from runtime.hub_lag import HubLagMonitor
from runtime.readiness import Readiness


def _client(ready=True, dead=None, stalled=frozenset()):
    return SimpleNamespace(ready=ready, dead_reason=dead, stalled_ranks=stalled)


def test_ready_only_with_registered_live_engines_not_draining_and_a_prompt_hub():
    lag = [0.0]
    client = [None]
    r = Readiness(0.5, engines=lambda: client[0], hub_lag=lambda: lag[0])
    assert r.not_ready_reasons() == ["the engines have not registered yet"]
    client[0] = _client(ready=False)
    assert r.not_ready_reasons() == ["the engines have not registered yet"]
    client[0] = _client()
    assert r.not_ready_reasons() == []
    lag[0] = 0.7
    assert r.not_ready_reasons() == ["the HTTP hub is 700 ms late (threshold 500 ms)"]
    lag[0] = 0.1
    r.set_draining()
    assert r.draining and r.not_ready_reasons() == ["the server is draining (shutting down)"]
    r.set_draining(False)
    client[0] = _client(stalled=frozenset({1, 0}))
    assert r.not_ready_reasons() == ["engine 0, 1 stalled"]
    client[0] = _client()
    assert r.not_ready_reasons() == []
    client[0] = _client(dead="connection lost")
    assert r.not_ready_reasons() == ["the engine core is dead (connection lost)"]


def test_a_zero_threshold_never_reports_the_hub():
    r = Readiness(0, engines=_client, hub_lag=lambda: 5.0)
    assert r.not_ready_reasons() == []


def test_the_monitor_measures_a_blocked_hub_and_forgets_it_after_its_window():
    samples = []
    monitor = HubLagMonitor(0.02, lambda lag, window_max: samples.append(lag))
    monitor.start()
    try:
        gevent.sleep(0.1)
        assert monitor.recent() < 0.3
        time.sleep(0.4)  # blocks the hub: the monitor's timer cannot fire meanwhile
        # Seen even before the late timer has run (the sample is overdue) ...
        assert monitor.recent() >= 0.35
        gevent.sleep(0.05)
        # ... and as a sample once it has.
        assert max(samples) >= 0.35
        assert monitor.recent() >= 0.35
        gevent.sleep(1.2)  # one window of prompt samples later
        assert monitor.recent() < 0.35
    finally:
        monitor.stop()
    assert not monitor.running
