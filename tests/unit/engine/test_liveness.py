"""engine.liveness: when a silent engine is pinged, when it is stalled, when it is taken back."""
from __future__ import annotations

from engine.liveness import Liveness


def _busy(counts: dict[int, int]):
    return lambda rank: counts.get(rank, 0)


def test_silence_with_requests_in_flight_is_a_stall_after_the_timeout():
    live = Liveness([0], timeout=9.0, now=0.0)
    counts = {0: 0}
    live.heard(0, 99.0)  # the last idle ping's answer
    live.became_busy(0, 100.0)
    counts[0] = 1
    # Pinged 3 s after it last spoke; stalled 9 s after the request went in, not before.
    assert live.check(101.9, _busy(counts)) == ([], [])
    assert live.check(102.0, _busy(counts)) == ([0], [])
    assert live.check(108.9, _busy(counts)) == ([], [])
    assert live.check(109.0, _busy(counts)) == ([], [0])
    assert live.stalled == frozenset({0}) and live.longest_silence(110.0) == 11.0
    assert live.refusal(None, 110.0) is not None and live.refusal(0, 110.0).status == 503
    assert live.check(120.0, _busy(counts)) == ([], [])  # reported once
    assert live.heard(0, 121.0) is True and live.stalled == frozenset()
    assert live.refusal(None, 121.0) is None


def test_an_answered_ping_keeps_a_busy_engine_alive():
    live = Liveness([0], timeout=9.0, now=0.0)
    counts = {0: 1}
    live.became_busy(0, 0.0)
    assert live.check(3.0, _busy(counts)) == ([0], [])
    assert live.heard(0, 4.0) is False  # the ping's answer, between two long steps
    assert live.check(6.9, _busy(counts)) == ([], [])
    assert live.check(7.0, _busy(counts)) == ([0], [])  # 3 s silent again: the next ping
    assert live.heard(0, 12.0) is False  # answered after a step of 5 s
    assert live.check(13.0, _busy(counts)) == ([], [])  # never 9 s without a word


def test_an_idle_engine_is_stalled_only_by_an_unanswered_ping():
    live = Liveness([0], timeout=6.0, now=0.0)
    idle = _busy({})
    assert live.check(2.0, idle) == ([0], [])  # ping after min(6/3, 5) s
    assert live.check(7.9, idle) == ([], [])
    assert live.check(8.0, idle) == ([], [0])  # unanswered for 6 s


def test_dp_only_the_silent_rank_is_stalled_and_refused():
    live = Liveness([0, 1], timeout=6.0, now=0.0)
    counts = {0: 1, 1: 1}
    live.became_busy(0, 0.0)
    live.became_busy(1, 0.0)
    live.check(2.0, _busy(counts))
    live.heard(0, 5.0)
    assert live.check(6.0, _busy(counts))[1] == [1]
    assert live.refusal(None, 6.0) is None  # rank 0 serves
    assert live.refusal(0, 6.0) is None
    assert "engine 1" in live.refusal(1, 6.0).message


def test_a_long_utility_call_suspends_the_watch():
    live = Liveness([0], timeout=6.0, now=0.0)
    counts = {0: 1}
    live.became_busy(0, 0.0)
    live.suspend(0, +1)
    assert live.check(100.0, _busy(counts)) == ([], [])
    live.suspend(0, -1)
    live.heard(0, 100.0)  # the call's answer
    assert live.check(101.0, _busy(counts)) == ([], [])


def test_a_zero_timeout_turns_the_watch_off():
    assert not Liveness([0], timeout=0.0, now=0.0).enabled
