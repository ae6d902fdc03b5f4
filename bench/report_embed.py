"""The embed scenarios' part of the report: one table of every embed phase, and greenfront beside
each vLLM peer of the same run.

``embed_tables(results)`` returns Markdown lines (nothing when no embed phase ran); ``bench.report``
calls it once. Columns: batches/s, inputs/s, prompt tokens/s, request latency, ``/health``
p50/p99/p99.9/max, errors (load + prober), server CPU ms per request and the answer's mean size.
The ratio table divides greenfront's pooling deployment by each peer's phase of the same scenario.

Runs on: the benchmark orchestrator process (report rendering).
"""
from __future__ import annotations

from typing import Any

from bench.deploy import POOLING_ARGS
from bench.embed_load import EMBED_SCENARIOS

#: The label of greenfront's own pooling deployment (``bench.plan``).
GREENFRONT = "greenfront pooling"


def _ms(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:.2f} s"
    return f"{v:.0f} ms" if v >= 100 else f"{v:.1f} ms"


def _cpu_ms_per_request(p: dict[str, Any]) -> float | None:
    """Server CPU ms per answered request; None for a bare URL (its processes are unknown)."""
    done = p["load"]["completed"]
    return p["cpu_s"]["server"] * 1000 / done if p["cpu_s"]["server"] and done else None


def _errors(p: dict[str, Any]) -> int:
    return p["load"]["errors"] + p["health"]["errors"]


def _phases(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in results["phases"] if p["scenario"] in EMBED_SCENARIOS]


def _main_table(rows: list[dict[str, Any]]) -> list[str]:
    first = rows[0]["load"]
    t = rows[0]["timing"]
    dims = sorted({d for p in rows for d in p["load"].get("dims", [])})
    out = [(f"### Embeddings: /v1/embeddings, {first['inputs_per_request']} distinct inputs of "
            f"~{first['tokens_per_input']:.0f} tokens per request, {t['long_concurrency']} "
            f"concurrent (closed loop, a new connection per request), vectors of "
            f"{'/'.join(map(str, dims)) or '?'} floats (the simulator with "
            f"`{' '.join(POOLING_ARGS)}`), /health probed "
            f"{t['probe_rate']:.0f}/s"), "",
           ("| configuration | encoding | req/s | inputs/s | prompt tok/s | latency p50 | p99 "
            "| /health p50 | p99 | p99.9 | max | errors | server CPU ms/req | answer kB |"),
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in rows:
        load, health, lat = p["load"], p["health"]["latency_ms"], p["load"]["latency_ms"]
        cpu = _cpu_ms_per_request(p)
        out.append(f"| {p['endpoint']} | {load['encoding_format']} | {load['req_per_s']:.1f} "
                   f"| {load['inputs_per_s']:,.0f} | {load['prompt_tokens_per_s']:,.0f} "
                   f"| {_ms(lat['p50'])} | {_ms(lat['p99'])} | {_ms(health['p50'])} "
                   f"| {_ms(health['p99'])} | {_ms(health['p99.9'])} | {_ms(health['max'])} "
                   f"| {_errors(p)} | {'—' if cpu is None else f'{cpu:.1f}'} "
                   f"| {load['answer_bytes_mean'] / 1000:.1f} |")
    return out + [""]


def _ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or not b else f"{a / b:.2f}×"


def _ratio_table(rows: list[dict[str, Any]]) -> list[str]:
    by = {(p["endpoint"], p["scenario"]): p for p in rows}
    peers = [p for p in rows if p["endpoint"] != GREENFRONT and (GREENFRONT, p["scenario"]) in by]
    if not peers:
        return []
    out = ["### Embeddings: greenfront ÷ each peer (same simulator, same pinning)", "",
           ("| scenario | peer | req/s | latency p50 | /health p50 | p99 | p99.9 "
            "| server CPU per request |"),
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for peer in peers:
        ours = by[(GREENFRONT, peer["scenario"])]
        h_ours, h_peer = ours["health"]["latency_ms"], peer["health"]["latency_ms"]
        out.append(f"| {peer['scenario']} | {peer['endpoint']} "
                   f"| {_ratio(ours['load']['req_per_s'], peer['load']['req_per_s'])} "
                   f"| {_ratio(ours['load']['latency_ms']['p50'], peer['load']['latency_ms']['p50'])} "
                   + " ".join(f"| {_ratio(h_ours[q], h_peer[q])}" for q in ("p50", "p99", "p99.9"))
                   + f" | {_ratio(_cpu_ms_per_request(ours), _cpu_ms_per_request(peer))} |")
    return out + ["", "Throughput above 1× and latency and CPU below 1× favour greenfront.", ""]


def embed_tables(results: dict[str, Any]) -> list[str]:
    """The embed scenarios' Markdown: every phase, then greenfront ÷ each peer."""
    rows = _phases(results)
    if not rows:
        return []
    return _main_table(rows) + _ratio_table(rows)
