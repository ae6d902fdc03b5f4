"""What the engines' step messages say, recorded as vLLM's frontend records it.

For every ``EngineCoreOutputs`` the engine-I/O thread demultiplexes: the scheduler gauges
(running, waiting, KV-cache usage), the prefix-cache counters, and the per-step figures vLLM keeps
in its IterationStats: tokens generated and prefilled (by source), tokens per step, preemptions,
time to first token (frontend arrival to the step's receipt) and inter-token latency (between the
engine timestamps of a request's consecutive steps). Each request's ``RequestTiming`` is filled
here for the latencies the HTTP hub records when it finishes (``runtime.metrics.requests``).

Owning thread: the engine-I/O thread (``on_step`` and the flush greenlet it starts there).
Everything gathers in a ``Batch``; every flush interval its values are handed to the HTTP hub,
which writes them to the shared files (``runtime.metrics.local`` says why).

Runs on: the engine-I/O thread.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import gevent

from base.handoff import HubInbox
from engine.protocol import EngineCoreEventType
from runtime.metrics.families import PROMPT_SOURCES, WAITING_REASONS
from runtime.metrics.local import Batch, PerEngine
from runtime.metrics.lora_requests import LoraRequests

_QUEUED = int(EngineCoreEventType.QUEUED)
_SCHEDULED = int(EngineCoreEventType.SCHEDULED)
_PREEMPTED = int(EngineCoreEventType.PREEMPTED)


class _Engine:
    """The series of one engine (DP rank): local counters and histograms, direct gauges."""

    def __init__(self, families: Any, labels: tuple[str, str], batch: Batch) -> None:
        def counter(name: str, *extra: str):
            return batch.counter(families[name].labels(*labels, *extra))

        def histogram(name: str):
            return batch.histogram(families[name].labels(*labels))

        def gauge(name: str, *extra: str):
            return batch.gauge(families[name].labels(*labels, *extra))
        self.running = gauge("vllm:num_requests_running")
        self.waiting = gauge("vllm:num_requests_waiting")
        self.waiting_by = [gauge("vllm:num_requests_waiting_by_reason", r) for r in WAITING_REASONS]
        self.kv_usage = gauge("vllm:kv_cache_usage_perc")
        self.prefix_queries = counter("vllm:prefix_cache_queries")
        self.prefix_hits = counter("vllm:prefix_cache_hits")
        self.external_queries = counter("vllm:external_prefix_cache_queries")
        self.external_hits = counter("vllm:external_prefix_cache_hits")
        self.cached_device = counter("vllm:prompt_tokens_cached_by_source", "device")
        self.preemptions = counter("vllm:num_preemptions")
        self.prompt_tokens = counter("vllm:prompt_tokens")
        self.by_source = [counter("vllm:prompt_tokens_by_source", s) for s in PROMPT_SOURCES]
        self.cached = counter("vllm:prompt_tokens_cached")
        self.generation_tokens = counter("vllm:generation_tokens")
        self.iteration_tokens = histogram("vllm:iteration_tokens_total")
        self.ttft = histogram("vllm:time_to_first_token_seconds")
        self.itl = histogram("vllm:inter_token_latency_seconds")


class EngineStepRecorder:
    """The engine client's ``observer``: ``on_step`` for each step message of any engine."""

    def __init__(self, families: Any, model_name: str, flush_interval: float,
                 to_hub: Callable[[list], None],
                 lora: Callable[[Batch], LoraRequests] | None = None) -> None:
        self._to_hub = to_hub
        self._interval = flush_interval
        self._batch = Batch()
        #: vllm:lora_requests_info, when the engines support LoRA (``lora(batch)`` makes it).
        self._lora = lora(self._batch) if lora is not None else None
        self._engines = PerEngine(lambda labels, batch: _Engine(families, labels, batch),
                                  model_name, self._batch)
        self._flusher: gevent.Greenlet | None = None
        #: Flushes asked for by the HTTP hub (a scrape), run here (made in this thread's hub).
        self._flush_asks: HubInbox | None = None
        self.latest_stats: dict[int, Any] = {}  # rank -> SchedulerStats (the stats log line)

    def on_step(self, outputs: Any, batch: list) -> None:
        if self._flusher is None:  # first call: in the engine-I/O thread's hub
            self._flusher = gevent.spawn(self._flush_periodically)
            self._flush_asks = HubInbox(self._flush_now)
        engine = self._engines[outputs.engine_index]
        stats = outputs.scheduler_stats
        if stats is not None:
            # The engine's step time orders the gauges across workers: two steps' stats can
            # reach two workers (vLLM sends a step's stats to one of the clients with outputs in
            # it, else to client 0) and be read in the opposite order.
            self._scheduler(engine, stats, outputs.timestamp or time.monotonic())
            self.latest_stats[outputs.engine_index] = stats
        if outputs.outputs:
            self._iteration(engine, outputs.timestamp, batch)
        if stats is not None and self._lora is not None:
            self._lora.on_stats()  # after the outputs, as vLLM updates its LoRA states first

    def _scheduler(self, engine: _Engine, stats: Any, at: float) -> None:
        engine.running.set(stats.num_running_reqs, at)
        engine.waiting.set(stats.num_waiting_reqs + stats.num_skipped_waiting_reqs, at)
        engine.waiting_by[0].set(stats.num_waiting_reqs, at)
        engine.waiting_by[1].set(stats.num_skipped_waiting_reqs, at)
        engine.kv_usage.set(stats.kv_cache_usage, at)
        prefix = stats.prefix_cache_stats
        engine.prefix_queries.inc(prefix.queries)
        engine.prefix_hits.inc(prefix.hits)
        engine.cached_device.inc(prefix.hits)
        external = stats.connector_prefix_cache_stats
        if isinstance(external, dict):  # decoded loosely: a map when a KV connector reports
            engine.external_queries.inc(external.get("queries", 0) or 0)
            engine.external_hits.inc(external.get("hits", 0) or 0)

    def _iteration(self, engine: _Engine, step_ts: float, batch: list) -> None:
        """vLLM's IterationStats for one step message, then recorded."""
        now = time.time()
        generated = computed = total = local_hit = external = cached = preempted = 0
        ttft, itl, lora = engine.ttft, engine.itl, self._lora
        # PERF: the running requests of a step mostly got their previous token in one and the
        # same earlier step, so their inter-token gaps are counted per previous step time and
        # observed once each (one histogram update per output was ~12% of the engine-I/O thread's
        # GIL samples at 1,024 streams, py-spy --gil).
        gaps: dict[float, int] = {}
        for stream, output, _ in batch:
            timing = stream.timing
            if timing is None:
                continue
            if timing.lora_name is not None and lora is not None:
                lora.on_output(timing.lora_name, stream, output)
            new = len(output.new_token_ids)
            generated += new
            timing.generated += new
            if output.events:
                preempted += _apply_events(timing, output.events)
            if timing.prefilling:
                prefill = output.prefill_stats
                if prefill is not None:
                    computed += prefill.num_computed_tokens
                    total += prefill.num_prompt_tokens
                    cached += prefill.num_cached_tokens
                    local_hit += prefill.num_local_cached_tokens
                    external += prefill.num_external_cached_tokens
                    timing.cached_tokens = prefill.num_cached_tokens
                ttft.observe(now - timing.arrival)
                timing.first_token = step_ts
                timing.prefilling = False
            else:
                last = timing.last_token
                gaps[last] = gaps.get(last, 0) + 1
            timing.last_token = step_ts
            timing.last_wall = now
        for last, times in gaps.items():
            itl.observe(step_ts - last, times)
        engine.generation_tokens.inc(generated)
        engine.prompt_tokens.inc(total)
        for counter, value in zip(engine.by_source, (computed, local_hit, external)):
            counter.inc(value)
        engine.cached.inc(cached)
        engine.preemptions.inc(preempted)
        engine.iteration_tokens.observe(computed + generated)

    def ask_flush(self, marker: tuple) -> bool:
        """Any thread: hand every pending figure to the hub now, followed by ``marker`` (a
        write the hub runs once they are written); False when no step came yet (nothing is
        pending)."""
        asks = self._flush_asks
        if asks is None:
            return False
        asks.post(marker)
        return True

    def _flush_now(self, markers: list[tuple]) -> None:
        self._to_hub(self._batch.detach() + markers)

    def _flush_periodically(self) -> None:
        while True:
            gevent.sleep(self._interval)
            pending = self._batch.detach()
            if pending:
                self._to_hub(pending)


def _apply_events(timing: Any, events: list) -> int:
    """QUEUED/SCHEDULED/PREEMPTED events into the request's timing; preemptions seen."""
    preempted = 0
    for event in events:
        kind = event.type
        if kind == _QUEUED:
            timing.queued = event.timestamp
        elif kind == _SCHEDULED:
            if not timing.scheduled:  # the first scheduling; later ones follow preemptions
                timing.scheduled = event.timestamp
        elif kind == _PREEMPTED:
            timing.preemptions += 1
            preempted += 1
    return preempted
