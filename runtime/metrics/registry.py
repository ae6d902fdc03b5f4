"""prometheus-client objects for the families of ``runtime.metrics.families``, and the scrape.

With ``PROMETHEUS_MULTIPROC_DIR`` set (the gunicorn master sets it to ``<run dir>/prometheus``
before it forks workers) every worker writes its values to files there and a scrape reads all of
them, so whichever worker answers reports the whole deployment; the master's ``child_exit`` hook
marks dead workers (their live gauges go, their counts stay). Without it (unit tests, a bare
import) the values live in this process.

Runs on: built in each worker after fork (the HTTP hub); ``exposition`` on a request-pool thread.
"""
from __future__ import annotations

import os
from typing import Any, Iterable

from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram, Summary,
                               multiprocess)
from prometheus_client.exposition import choose_encoder
from prometheus_client.platform_collector import PlatformCollector

from runtime.metrics.families import BUCKETS, Family, one_two_five
from runtime.metrics.process import DeploymentProcessCollector

_KINDS = {"counter": Counter, "gauge": Gauge, "histogram": Histogram, "summary": Summary}


def multiprocess_dir() -> str:
    """The shared directory when prometheus-client runs in multiprocess mode, else ""."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


class Families:
    """The metric objects by name. In multiprocess mode they are registered nowhere (the scrape
    reads the files); otherwise in ``registry``."""

    def __init__(self, families: Iterable[Family], max_model_len: int,
                 bucket_overrides: dict[str, tuple[float, ...]] | None = None) -> None:
        self.dir = multiprocess_dir()
        # --custom-histogram-buckets: a family key's bounds replace its defaults verbatim.
        self._overrides = bucket_overrides or {}
        self.registry = None if self.dir else CollectorRegistry()
        self.by_name: dict[str, Any] = {}
        self.add(families, max_model_len)

    def add(self, families: Iterable[Family], max_model_len: int) -> None:
        """Make more families (the vLLM ones once ``max_model_len`` is known)."""
        for family in families:
            self.by_name[family.name] = self._make(family, max_model_len)

    def _make(self, family: Family, max_model_len: int) -> Any:
        kwargs: dict[str, Any] = {"labelnames": family.labels, "registry": self.registry}
        if family.kind == "gauge":
            kwargs["multiprocess_mode"] = family.mode
        if family.kind == "histogram":
            custom = self._overrides.get(family.buckets)
            kwargs["buckets"] = (custom if custom is not None else
                                 one_two_five(max_model_len) if family.buckets == "request_tokens"
                                 else BUCKETS[family.buckets])
        return _KINDS[family.kind](family.name, family.help, **kwargs)

    def __getitem__(self, name: str) -> Any:
        return self.by_name[name]

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The scrape body and its content type: OpenMetrics when ``accept`` asks for it,
        Prometheus text otherwise."""
        if self.dir:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, path=self.dir)
        else:
            registry = CollectorRegistry()
            registry.register(_Forward(self.registry))
        registry.register(DeploymentProcessCollector())
        PlatformCollector(registry=registry)
        encoder, content_type = choose_encoder(accept or "")
        return encoder(registry), content_type


class _Forward:
    """Exposes another registry's metrics inside a scrape registry (single-process mode)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self):
        return self._registry.collect()


def mark_dead(pid: int) -> None:
    """Gunicorn master: worker ``pid`` exited; drop its live-only gauge files."""
    path = multiprocess_dir()
    if path:
        multiprocess.mark_process_dead(pid, path)
