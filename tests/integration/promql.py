"""Just enough PromQL to evaluate dashboard queries against two scrapes of one target.

Supports the shapes Grafana dashboards for vLLM use: instant selectors with ``=`` label matchers,
``rate(selector[range])`` and ``increase(…)`` (the difference between the two scrapes over their
interval), ``sum by(labels) (…)``, ``avg(…)``, ``histogram_quantile(q, …)`` and ``/`` between two
of these (matched on identical label sets). A result is a dict ``{frozenset(labels): value}``.
"""
from __future__ import annotations

import math
import re
from typing import Callable

from prometheus_client.parser import text_string_to_metric_families

Vector = dict[frozenset, float]


def samples(text: str) -> dict[str, Vector]:
    """Every sample of a scrape, by sample name."""
    out: dict[str, Vector] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return out


class Evaluator:
    def __init__(self, before: str, after: str, seconds: float) -> None:
        self._before, self._after = samples(before), samples(after)
        self._seconds = seconds

    def eval(self, expr: str) -> Vector:
        expr = expr.strip()
        while expr.startswith("(") and _closing(expr, 0) == len(expr) - 1:
            expr = expr[1:-1].strip()
        split = _top_level(expr, "/")
        if split is not None:
            left, right = self.eval(expr[:split]), self.eval(expr[split + 1:])
            return {k: left[k] / right[k] for k in left if k in right and right[k] != 0}
        m = re.fullmatch(r"histogram_quantile\(\s*([0-9.]+)\s*,(.*)\)", expr, re.S)
        if m:
            return _quantile(float(m.group(1)), self.eval(m.group(2)))
        m = re.fullmatch(r"sum\s+by\s*\(([^)]*)\)\s*(\(.*\))", expr, re.S)
        if m:
            return _aggregate(self.eval(m.group(2)), _names(m.group(1)), sum)
        m = re.fullmatch(r"(sum|avg)\s*(\(.*\))", expr, re.S)
        if m:
            how: Callable = sum if m.group(1) == "sum" else (lambda v: sum(v) / len(v))
            return _aggregate(self.eval(m.group(2)), (), how)
        m = re.fullmatch(r"(rate|increase)\((.*)\[[^\]]+\]\)", expr, re.S)
        if m:
            name, matchers = _selector(m.group(2))
            now, then = _select(self._after, name, matchers), _select(self._before, name, matchers)
            scale = self._seconds if m.group(1) == "rate" else 1.0
            return {k: (v - then.get(k, 0.0)) / scale for k, v in now.items()}
        name, matchers = _selector(expr)
        return _select(self._after, name, matchers)


def _closing(expr: str, start: int) -> int:
    depth = 0
    for i in range(start, len(expr)):
        depth += {"(": 1, ")": -1}.get(expr[i], 0)
        if depth == 0:
            return i
    return -1


def _top_level(expr: str, op: str) -> int | None:
    depth = 0
    for i, ch in enumerate(expr):
        depth += {"(": 1, ")": -1, "[": 1, "]": -1, "{": 1, "}": -1}.get(ch, 0)
        if ch == op and depth == 0:
            return i
    return None


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _selector(text: str) -> tuple[str, dict[str, str]]:
    m = re.fullmatch(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?\s*", text, re.S)
    assert m, f"unsupported selector: {text!r}"
    matchers = dict(re.findall(r'([a-zA-Z_]+)\s*=\s*"([^"]*)"', m.group(2) or ""))
    return m.group(1), matchers


def _select(scrape: dict[str, Vector], name: str, matchers: dict[str, str]) -> Vector:
    return {labels: value for labels, value in scrape.get(name, {}).items()
            if all((k, v) in labels for k, v in matchers.items())}


def _aggregate(vector: Vector, by: tuple[str, ...], how: Callable) -> Vector:
    groups: dict[frozenset, list[float]] = {}
    for labels, value in vector.items():
        key = frozenset((k, v) for k, v in labels if k in by)
        groups.setdefault(key, []).append(value)
    return {key: how(values) for key, values in groups.items()}


def _quantile(q: float, vector: Vector) -> Vector:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket of rank q."""
    groups: dict[frozenset, list[tuple[float, float]]] = {}
    for labels, value in vector.items():
        le = dict(labels)["le"]
        key = frozenset((k, v) for k, v in labels if k != "le")
        groups.setdefault(key, []).append((float(le), value))
    out: Vector = {}
    for key, buckets in groups.items():
        buckets.sort()
        total = buckets[-1][1]
        if total <= 0:
            out[key] = math.nan
            continue
        rank, lower, below = q * total, 0.0, 0.0
        for upper, count in buckets:
            if count >= rank:
                if math.isinf(upper):
                    out[key] = lower
                else:
                    out[key] = lower + (upper - lower) * (rank - below) / max(count - below, 1e-12)
                break
            lower, below = upper, count
    return out
