"""The request pool: calls run on native threads, results and errors come back to the waiting
greenlet, cancelled work is skipped, and queued work does not wait for the hub."""
from __future__ import annotations

import gevent
import pytest
from gevent import monkey

from runtime.request_pool import RequestPool, Skipped

_native_sleep = monkey.get_original("time", "sleep")
_native_ident = monkey.get_original("_thread", "get_ident")
_native_tid = monkey.get_original("_thread", "get_native_id")


@pytest.fixture
def pool():
    p = RequestPool(2)
    yield p
    p.shutdown()


def test_calls_run_on_other_native_threads_and_return_their_values(pool):
    hub_thread = _native_ident()
    results = [gevent.spawn(pool.apply, lambda x: (x * 2, _native_ident()), (i,))
               for i in range(50)]
    gevent.joinall(results, timeout=10, raise_error=True)
    assert [g.value[0] for g in results] == [i * 2 for i in range(50)]
    threads = {g.value[1] for g in results}
    assert hub_thread not in threads and 1 <= len(threads) <= 2


def test_an_exception_reaches_the_waiting_greenlet_and_the_threads_live_on(pool):
    def boom():
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        pool.apply(boom)
    assert pool.apply(lambda: "still here") == "still here"


def test_work_cancelled_before_a_thread_takes_it_is_skipped(pool):
    ran = []
    gate = monkey.get_original("threading", "Event")()
    # Two calls occupy both threads until the gate opens; the third waits in the queue.
    blockers = [gevent.spawn(pool.apply, gate.wait, (10,)) for _ in range(2)]
    cancelled = [False]
    waiter = gevent.spawn(pool.apply, lambda: ran.append(1), (), lambda: cancelled[0])
    gevent.sleep(0.05)
    cancelled[0] = True
    gate.set()
    gevent.joinall(blockers + [waiter], timeout=10)
    assert isinstance(waiter.exception, Skipped)
    assert ran == []


def test_queued_work_keeps_flowing_while_the_hub_is_busy(pool):
    # gevent's ThreadPool.apply admits at most `size` calls until the hub frees slots; here the
    # threads take every queued call while the hub does not run at all.
    done = []
    lock = monkey.get_original("threading", "Lock")()

    def work(i):
        with lock:
            done.append(i)

    greenlets = [gevent.spawn(pool.apply, work, (i,)) for i in range(40)]
    gevent.sleep(0)  # every greenlet has queued its call
    _native_sleep(0.5)  # the hub is blocked: nothing can be freed through it
    with lock:
        ran_while_blocked = len(done)
    gevent.joinall(greenlets, timeout=10, raise_error=True)
    assert ran_while_blocked == 40


def test_pool_threads_take_the_niceness_they_are_given_and_the_hub_keeps_its_own():
    import os

    before = os.getpriority(os.PRIO_PROCESS, _native_tid())
    nice_pool = RequestPool(1, nice=min(19, before + 7))
    try:
        tid = nice_pool.apply(_native_tid)
        assert os.getpriority(os.PRIO_PROCESS, tid) == min(19, before + 7)
        assert os.getpriority(os.PRIO_PROCESS, _native_tid()) == before
    finally:
        nice_pool.shutdown()


def test_light_work_runs_at_the_process_niceness_and_heavy_work_at_the_pools():
    import os

    before = os.getpriority(os.PRIO_PROCESS, _native_tid())
    nice = min(19, before + 7)
    lanes = RequestPool(2, nice=nice)
    try:
        heavy = {lanes.apply(_native_tid) for _ in range(20)}
        light = {lanes.apply(_native_tid, light=True) for _ in range(20)}
        assert heavy.isdisjoint(light)  # separate threads: niceness is never lowered again
        assert {os.getpriority(os.PRIO_PROCESS, tid) for tid in heavy} == {nice}
        assert {os.getpriority(os.PRIO_PROCESS, tid) for tid in light} == {before}
    finally:
        lanes.shutdown()


def test_light_work_is_not_queued_behind_heavy_work():
    gate = monkey.get_original("threading", "Event")()
    lanes = RequestPool(1, nice=1)
    try:
        blocked = gevent.spawn(lanes.apply, gate.wait, (10,))  # the one heavy thread is busy
        gevent.sleep(0.05)
        assert lanes.apply(lambda: "light", light=True) == "light"
        gate.set()
        assert blocked.get(timeout=10) is True
    finally:
        gate.set()
        lanes.shutdown()


def test_without_a_niceness_light_and_heavy_work_share_one_lane():
    lane = RequestPool(1)
    try:
        assert lane.apply(_native_tid) == lane.apply(_native_tid, light=True)
    finally:
        lane.shutdown()
