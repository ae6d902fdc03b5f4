"""Percentile summaries shared by the load generator, the prober and the report.

Runs on: any benchmark process (pure functions).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

#: The percentiles every latency summary carries (the report's columns pick from them).
QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p99.9", 0.999))


def percentiles(ordered: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/p99.9/max/mean/count of already sorted values (nearest-rank; empty: zeros)."""
    n = len(ordered)
    if not n:
        return {name: 0.0 for name, _ in QUANTILES} | {"max": 0.0, "mean": 0.0, "count": 0}
    out = {name: float(ordered[min(n - 1, max(0, math.ceil(q * n) - 1))]) for name, q in QUANTILES}
    out.update(max=float(ordered[-1]), mean=float(sum(ordered) / n), count=n)
    return out


def write_result(path: str, result: dict) -> None:
    """A measuring process's result as JSON, with the CPU seconds it used itself."""
    import json
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_s_total"] = usage.ru_utime + usage.ru_stime
    with open(path, "w") as f:
        json.dump(result, f)


def cpu_per_1k_tokens(phase: dict) -> float | None:
    """Server CPU ms per 1k streamed tokens of a streaming phase (None: the server's processes
    are unknown, as for a bare ``--target`` URL, or nothing was streamed)."""
    tokens = phase["load"]["tokens_per_s"] * phase["cpu_s"]["window_s"]
    server = phase["cpu_s"]["server"]
    return server / tokens * 1e6 if server and tokens else None
