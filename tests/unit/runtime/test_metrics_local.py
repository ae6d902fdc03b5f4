"""Batched metric updates scrape exactly as direct prometheus-client updates do."""
from __future__ import annotations

import functools
import os
import subprocess
import sys

from prometheus_client import CollectorRegistry, Counter, Histogram, Summary, generate_latest

from runtime.metrics.families import one_two_five
from runtime.metrics.local import Batch

VALUES = [0.0, 0.01, 0.0101, 0.3, 0.3, 2.0, 7.5, 1e9]


def _scrape(registry) -> list[bytes]:
    # The `_created` samples differ (the metrics were made at different times).
    return [line for line in generate_latest(registry).splitlines() if b"_created" not in line]


def _pair(kind, **kwargs):
    direct, batched = CollectorRegistry(), CollectorRegistry()
    return (kind("m", "help", ["a"], registry=direct, **kwargs),
            kind("m", "help", ["a"], registry=batched, **kwargs), direct, batched)


def test_batched_histograms_counters_and_summaries_scrape_like_direct_updates():
    batch = Batch()
    for kind, kwargs in ((Histogram, {"buckets": (0.01, 0.3, 1.0, 7.5)}), (Summary, {})):
        direct, batched, reg_direct, reg_batched = _pair(kind, **kwargs)
        local = batch.histogram(batched.labels("x"))
        for value in VALUES:
            direct.labels("x").observe(value)
            local.observe(value)
        assert _scrape(reg_batched) != _scrape(reg_direct)  # nothing written yet
        assert batch.flush() == 1
        assert _scrape(reg_batched) == _scrape(reg_direct)
        for value in VALUES[:3]:  # a second round adds to the first
            direct.labels("x").observe(value)
            local.observe(value)
        batch.flush()
        assert _scrape(reg_batched) == _scrape(reg_direct)
    direct, batched, reg_direct, reg_batched = _pair(Counter)
    local = batch.counter(batched.labels("x"))
    for amount in (1, 5, 0, 2.5):
        direct.labels("x").inc(amount)
        local.inc(amount)
    assert batch.flush() == 1
    assert batch.flush() == 0
    assert _scrape(reg_batched) == _scrape(reg_direct)


def test_a_value_observed_several_times_at_once_scrapes_like_each_time():
    batch = Batch()
    direct, batched, reg_direct, reg_batched = _pair(Histogram, buckets=(0.01, 0.3, 1.0, 7.5))
    local = batch.histogram(batched.labels("x"))
    for value, times in ((0.25, 3), (0.3, 1), (2.0, 4)):  # values exact in binary sums
        for _ in range(times):
            direct.labels("x").observe(value)
        local.observe(value, times)
    batch.flush()
    assert _scrape(reg_batched) == _scrape(reg_direct)


def test_token_buckets_follow_vllms_one_two_five_series():
    assert one_two_five(2048) == (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
    assert one_two_five(100) == (1, 2, 5, 10, 20, 50, 100)


_WORKER = """
import sys
from prometheus_client import Gauge
from runtime.metrics.local import Batch
batch = Batch()
gauge = batch.gauge(Gauge("running", "h", ["a"], multiprocess_mode="mostrecent").labels("x"))
gauge.set(float(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else None)
print("set", flush=True)
sys.stdin.readline()  # the flush waits for the test's word
batch.flush()
"""


def _worker(env: dict, *args: str) -> subprocess.Popen:
    """A worker process that has set the gauge and waits for the word to flush it."""
    proc = subprocess.Popen([sys.executable, "-c", _WORKER, *args], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == "set\n"
    return proc


def test_a_mostrecent_gauge_shows_the_latest_set_not_the_latest_flush(tmp_path):
    """Two workers: one sets 1 (a step before an abort) but flushes last; the other sets 0 after
    it. The scrape must show 0, the state of the engine now."""
    from prometheus_client import multiprocess

    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    worker = functools.partial(_worker, env)
    early = worker("1")
    late = worker("0")
    late.communicate("\n", timeout=60)
    early.communicate("\n", timeout=60)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path))
    assert b'running{a="x"} 0.0' in generate_latest(registry)


def test_engine_gauges_are_ordered_by_the_engines_step_time_not_by_when_a_worker_read_them(
        tmp_path):
    """The step before an abort (1 running, engine time 100) reaches one worker late; the step
    after it (0 running, engine time 101) reached the other worker first. The scrape shows 0."""
    from prometheus_client import multiprocess

    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    worker = functools.partial(_worker, env)
    after_abort = worker("0", "101")
    before_abort = worker("1", "100")
    after_abort.communicate("\n", timeout=60)
    before_abort.communicate("\n", timeout=60)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path))
    assert b'running{a="x"} 0.0' in generate_latest(registry)
