"""Prometheus metrics of one worker process (``/metrics``), with vLLM's family names.

Engine gauges come from the ``scheduler_stats`` the engines attach to their outputs (set from the
engine-I/O thread; prometheus-client metrics are thread-safe); request counters are counted in the
HTTP hub when a generation ends. Each worker keeps its own registry, so with several gunicorn
workers a scrape sees the worker that answered it.

Runs on: the engine-I/O thread (engine gauges) and the HTTP hub (counters, exposition).
"""
from __future__ import annotations

import logging
from typing import Any

import gevent
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


log = logging.getLogger("greenfront.stats")

class Metrics:
    """The registry and the families greenfront exports."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.registry = CollectorRegistry()
        engine = ["model_name", "engine"]
        self.running = Gauge("vllm:num_requests_running", "Requests in the engine's batch.",
                             engine, registry=self.registry)
        self.waiting = Gauge("vllm:num_requests_waiting", "Requests waiting in the engine.",
                             engine, registry=self.registry)
        self.kv_usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage (1 = full).",
                              engine, registry=self.registry)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prompt tokens of finished requests.",
                                     ["model_name"], registry=self.registry)
        self.generation_tokens = Counter("vllm:generation_tokens",
                                         "Tokens generated for finished requests.",
                                         ["model_name"], registry=self.registry)
        self.hub_lag = Gauge("greenfront:hub_lag_seconds",
                             "How late the HTTP hub's lag timer fired (the largest of the last "
                             "second).", registry=self.registry)
        self._engines: dict[int, Any] = {}
        self._totals = [0, 0]  # prompt, generation tokens (for the periodic stats line)
        self.request_success = Counter("vllm:request_success", "Finished requests by reason.",
                                       ["model_name", "finished_reason"], registry=self.registry)

    def observe_stats(self, engine: int, stats: Any) -> None:
        """Engine-I/O thread: one engine's ``SchedulerStats``."""
        self._engines[engine] = stats
        labels = (self.model_name, str(engine))
        self.running.labels(*labels).set(stats.num_running_reqs)
        self.waiting.labels(*labels).set(stats.num_waiting_reqs)
        self.kv_usage.labels(*labels).set(stats.kv_cache_usage)

    def observe_hub_lag(self, seconds: float) -> None:
        """HTTP hub: the lag monitor's latest window maximum."""
        self.hub_lag.set(seconds)

    def observe_finished(self, prompt_tokens: int, completion_tokens: int,
                         finish_reasons: list[str]) -> None:
        """HTTP hub: a generation ended with these counts and per-choice finish reasons."""
        self._totals[0] += prompt_tokens
        self._totals[1] += completion_tokens
        self.prompt_tokens.labels(self.model_name).inc(prompt_tokens)
        self.generation_tokens.labels(self.model_name).inc(completion_tokens)
        for reason in finish_reasons:
            self.request_success.labels(self.model_name, reason).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def log_periodically(self, interval: float) -> None:
        """HTTP hub greenlet: vLLM's periodic stats line, while there is something to say."""
        last = list(self._totals)
        while True:
            gevent.sleep(interval)
            prompt, generation = (self._totals[0] - last[0], self._totals[1] - last[1])
            last = list(self._totals)
            for engine, stats in sorted(self._engines.items()):
                if not (prompt or generation or stats.num_running_reqs or stats.num_waiting_reqs):
                    continue
                log.info("Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation "
                         "throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, "
                         "GPU KV cache usage: %.1f%%", engine, prompt / interval,
                         generation / interval, stats.num_running_reqs, stats.num_waiting_reqs,
                         stats.kv_cache_usage * 100)
