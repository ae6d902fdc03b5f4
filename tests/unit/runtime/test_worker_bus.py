"""The worker bus between the workers of one deployment (``runtime.worker_bus``): three buses in
one process stand for three workers' hubs sharing a run directory."""
from __future__ import annotations

import gevent

from runtime.worker_bus import WorkerBus


def _buses(tmp_path, count=3):
    buses = [WorkerBus(str(tmp_path), slot, count) for slot in range(count)]
    for bus in buses:
        bus.start()
    return buses


def test_broadcast_reaches_every_other_worker_not_the_sender(tmp_path):
    buses = _buses(tmp_path)
    got = {slot: [] for slot in range(3)}
    for slot, bus in enumerate(buses):
        bus.on("abort", got[slot].append)
    try:
        assert buses[1].broadcast("abort", ["a", "b"]) == 2
        gevent.sleep(0.05)
        assert got == {0: [["a", "b"]], 1: [], 2: [["a", "b"]]}
    finally:
        for bus in buses:
            bus.stop()


def test_ask_waits_until_every_reached_worker_handled_it(tmp_path):
    buses = _buses(tmp_path)
    handled = []

    def slow(slot):
        def handle(data):
            gevent.sleep(0.1 * slot)
            handled.append(slot)
        return handle
    for slot, bus in enumerate(buses):
        bus.on("flush_metrics", slow(slot))
    try:
        assert buses[0].ask("flush_metrics", None, timeout=5) == 2
        assert sorted(handled) == [1, 2]
    finally:
        for bus in buses:
            bus.stop()


def test_ask_gives_up_on_a_worker_that_is_not_there(tmp_path):
    buses = _buses(tmp_path, 3)
    buses[2].stop()
    for bus in buses:
        bus.on("flush_metrics", lambda data: None)
    try:
        # slot 2's socket file is left but nobody reads it: the ask ends at its timeout
        assert buses[0].ask("flush_metrics", None, timeout=0.3) <= 1
    finally:
        for bus in buses[:2]:
            bus.stop()


def test_a_restarted_worker_takes_its_slot_back(tmp_path):
    buses = _buses(tmp_path, 2)
    buses[1].stop()
    again = WorkerBus(str(tmp_path), 1, 2)
    again.start()
    got = []
    again.on("abort", got.append)
    try:
        assert buses[0].broadcast("abort", ["x"]) == 1
        gevent.sleep(0.05)
        assert got == [["x"]]
    finally:
        buses[0].stop()
        again.stop()
