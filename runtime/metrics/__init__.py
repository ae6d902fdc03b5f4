"""greenfront's metrics: vLLM 0.32's families, HTTP and process metrics, for the whole deployment.

``Metrics`` is the one object the rest of the worker talks to:

- the engine client's ``observer`` (``on_step``, engine-I/O thread): scheduler gauges, prefix
  cache, per-step token counts, TTFT and inter-token latency (``engine_side``);
- ``record_finished`` (HTTP hub): a generation's finished requests (``requests``);
  ``record_engine_request``: one of a beam search's step requests;
- ``http`` (HTTP hub): the HTTP middleware's per-request record (``middleware.http_metrics``);
- ``observe_hub_lag``, ``record_admission_rejection``, ``record_sleep_state`` (HTTP hub);
- ``exposition`` (a request-pool thread: reading every worker's files takes milliseconds).

The vLLM families are made once the engines registered (``start``): their token buckets end at
``max_model_len`` and ``vllm:cache_config_info`` carries the engines' cache figures.

Runs on: see each method.
"""
from __future__ import annotations

import logging
from typing import Any

import gevent
import gevent.event

from base.handoff import HubInbox
from runtime.metrics.engine_side import EngineStepRecorder
from runtime.metrics.families import (ADMISSION_REASONS, CACHE_CONFIG_FAMILY, CACHE_INFO_FIELDS,
                                      CACHE_TIERS, ENGINE_LABELS, FINISHED_REASONS,
                                      GREENFRONT_FAMILIES, HTTP_FAMILIES, LORA_INFO_FAMILY,
                                      PROMPT_SOURCES, SLEEP_STATES, VLLM_FAMILIES,
                                      WAITING_REASONS)
from runtime.metrics.local import Batch, write
from runtime.metrics.lora_requests import LoraRequests
from runtime.metrics.registry import Families
from runtime.metrics.requests import (FinishedRequest, FinishedRequestRecorder,
                                      finished_requests)

log = logging.getLogger("greenfront.stats")


#: Per-engine families with one more label, and the values vLLM creates a series for at start.
_EXTRA_LABEL_VALUES = {
    "vllm:num_requests_waiting_by_reason": WAITING_REASONS,
    "vllm:prompt_tokens_by_source": PROMPT_SOURCES,
    "vllm:prompt_tokens_cached_by_source": CACHE_TIERS,
    "vllm:request_success": FINISHED_REASONS,
}


def _create_series(families: Families, model: str, ranks: list[int]) -> None:
    """Every series vLLM shows from the start (at 0): each per-engine family for each engine,
    each admission reason. (prometheus-client shows a family only once it has a series.)"""
    for family in VLLM_FAMILIES:
        metric = families[family.name]
        if family.labels == ENGINE_LABELS:
            for rank in ranks:
                metric.labels(model, str(rank))
        elif family.name in _EXTRA_LABEL_VALUES:
            for rank in ranks:
                for value in _EXTRA_LABEL_VALUES[family.name]:
                    metric.labels(model, str(rank), value)
    for reason in ADMISSION_REASONS:
        families["vllm:admission_rejections"].labels(model, reason)


def _write_each(batches: list[list[tuple]]) -> None:
    for pending in batches:
        write(pending)


def _set_event(event: gevent.event.Event) -> None:
    """A flush's marker (``Metrics.flush_now``): written last, it wakes the waiting scrape."""
    event.set()


class HttpRecorder:
    """HTTP families, counted in the hub's ``Batch`` (HTTP hub)."""

    def __init__(self, families: Families, batch: Batch) -> None:
        self._families = families
        self._batch = batch
        self._series: dict[tuple, tuple] = {}
        self._highr = batch.histogram(families["http_request_duration_highr_seconds"])

    def record(self, method: str, status: str, handler: str, request_size: int,
               response_size: int, seconds: float) -> None:
        key = (method, status, handler)
        series = self._series.get(key)
        if series is None:
            f, b = self._families, self._batch
            series = self._series[key] = (
                b.counter(f["http_requests_total"].labels(method, status, handler)),
                b.histogram(f["http_request_size_bytes"].labels(handler)),
                b.histogram(f["http_response_size_bytes"].labels(handler)),
                b.histogram(f["http_request_duration_seconds"].labels(handler, method)))
        total, size_in, size_out, duration = series
        total.inc()
        size_in.observe(request_size)
        size_out.observe(response_size)
        duration.observe(seconds)
        self._highr.observe(seconds)


class Metrics:
    """The metrics of one worker process (see the module docstring)."""

    def __init__(self, model_name: str, flush_interval: float = 0.1,
                 bucket_overrides: dict[str, tuple[float, ...]] | None = None) -> None:
        self.model_name = model_name
        self.flush_interval = flush_interval
        self.families = Families(HTTP_FAMILIES + GREENFRONT_FAMILIES, 0, bucket_overrides)
        self._hub_batch = Batch()
        self.http = HttpRecorder(self.families, self._hub_batch)
        self._hub_lag = self.families["greenfront:hub_lag_seconds"]
        self._hub_lag_samples = self._hub_batch.histogram(
            self.families["greenfront:hub_lag_sample_seconds"])
        self.engine: EngineStepRecorder | None = None
        self.finished: FinishedRequestRecorder | None = None
        self._flusher: gevent.Greenlet | None = None
        self._inbox: HubInbox | None = None  # the engine-I/O thread's updates, to write
        self._ranks: list[int] = []

    # -- start / stop (HTTP hub) ------------------------------------------------------------
    def start_flushing(self) -> None:
        """HTTP hub, after fork: write the hub's gathered updates every flush interval."""
        if self._flusher is None:
            self._inbox = HubInbox(_write_each)
            self._flusher = gevent.spawn(self._flush_periodically)

    def start(self, registrations: dict[int, Any], max_model_len: int) -> None:
        """HTTP hub, once every engine registered: the vLLM families and their fixed series."""
        if self.engine is not None:
            return
        self.start_flushing()
        self.families.add(VLLM_FAMILIES + (CACHE_CONFIG_FAMILY,), max_model_len)
        self._ranks = sorted(registrations)
        f, model = self.families, self.model_name
        for rank, registration in sorted(registrations.items()):
            info = {name: str(getattr(registration, name, None)) for name in CACHE_INFO_FIELDS}
            f["vllm:cache_config_info"].labels(**info, engine=str(rank)).set(1)
        _create_series(f, model, self._ranks)
        self.record_sleep_state(sleeping=False)
        self.finished = FinishedRequestRecorder(f, model, self._hub_batch)
        self.engine = EngineStepRecorder(f, model, self.flush_interval, self._inbox.post,
                                         self._lora_requests(registrations))

    def _lora_requests(self, registrations: dict[int, Any]) -> Any:
        """The maker of vllm:lora_requests_info's tracker, when an engine supports LoRA (vLLM
        makes the family only with a lora_config; its label is lora_config.max_loras)."""
        lora = [r for r in registrations.values() if r.supports_lora]
        if not lora:
            return None
        self.families.add((LORA_INFO_FAMILY,), 0)
        family, max_loras = self.families["vllm:lora_requests_info"], lora[0].max_loras
        return lambda batch: LoraRequests(family, max_loras, batch)

    def stop(self) -> None:
        """HTTP hub, worker exiting: write what the hub has gathered."""
        if self._flusher is not None:
            self._flusher.kill(block=False)
            self._flusher = None
        self._hub_batch.flush()

    def _flush_periodically(self) -> None:
        while True:
            gevent.sleep(self.flush_interval)
            self._hub_batch.flush()

    # -- feeds ------------------------------------------------------------------------------
    def on_step(self, outputs: Any, batch: list) -> None:
        """Engine-I/O thread: the engine client's observer hook."""
        engine = self.engine
        if engine is not None:
            engine.on_step(outputs, batch)

    def record_finished(self, prepared: Any, streams: list, choices: list) -> None:
        """HTTP hub: every choice of ``prepared`` finished (``choices``: the output state's)."""
        if self.finished is not None:
            self.finished.record(finished_requests(prepared, streams, choices), prepared.n)

    def record_engine_request(self, request: FinishedRequest) -> None:
        """HTTP hub: one finished engine request of its own, sampled once (a beam search's
        step request: vLLM counts each like any request with ``n`` 1)."""
        if self.finished is not None:
            self.finished.record([request], 1)

    def observe_hub_lag(self, sample: float, window_max: float) -> None:
        """HTTP hub: each hub-lag sample, and the largest of the last second."""
        self._hub_lag_samples.observe(sample)
        self._hub_lag.set(window_max)

    def record_admission_rejection(self, reason: str) -> None:
        """HTTP hub: a request refused by a queue limit (``ADMISSION_REASONS``)."""
        if self.engine is not None:
            self._hub_batch.counter(self.families["vllm:admission_rejections"].labels(
                self.model_name, reason)).inc()

    def record_sleep_state(self, sleeping: bool, level: int = 0) -> None:
        """HTTP hub: the engines went to sleep (level 1 or 2) or woke up."""
        values = {"awake": int(not sleeping), "weights_offloaded": int(sleeping and level == 1),
                  "discard_all": int(sleeping and level == 2)}
        gauge = self.families["vllm:engine_sleep_state"]
        for rank in self._ranks:
            for state in SLEEP_STATES:
                gauge.labels(self.model_name, str(rank), state).set(values[state])

    def flush_now(self, timeout: float) -> None:
        """HTTP hub: write every figure this worker gathered so far, the engine-I/O thread's
        too, before returning (at most ``timeout`` s): a scrape then counts every step that
        finished before it (``docs/parity.md`` §6)."""
        self._hub_batch.flush()
        engine = self.engine
        if engine is None:
            return
        done = gevent.event.Event()
        if engine.ask_flush((_set_event, done)):
            done.wait(timeout)

    # -- scrape (request-pool thread) -------------------------------------------------------
    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        return self.families.exposition(accept)

    # -- vLLM's periodic stats line (HTTP hub greenlet) -------------------------------------
    def log_periodically(self, interval: float) -> None:
        last = [0, 0]
        while True:
            gevent.sleep(interval)
            if self.finished is None or self.engine is None:
                continue
            totals = list(self.finished.totals)
            prompt, generation = totals[0] - last[0], totals[1] - last[1]
            last = totals
            for rank, stats in sorted(self.engine.latest_stats.items()):
                if not (prompt or generation or stats.num_running_reqs or stats.num_waiting_reqs):
                    continue
                log.info("Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation "
                         "throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, "
                         "GPU KV cache usage: %.1f%%", rank, prompt / interval,
                         generation / interval, stats.num_running_reqs, stats.num_waiting_reqs,
                         stats.kv_cache_usage * 100)
