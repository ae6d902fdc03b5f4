"""Issues 11's and 26's targets: greenfront beside vLLM's Rust frontend in the same run.

``peer_targets(results)`` judges what the side-by-side phases can show (run with
``--vllm-peers rust[,greenfront,...]``): streaming with greenfront's default configuration
(issue 26: tokens/s ≥ the Rust frontend's, TTFT p50 ≤ 1.5× its, ``/health`` p99.9 ≤ its,
server CPU per 1k streamed tokens ≤ 1.25× its), and long prompts and ``/tokenize`` (throughput ≥ 1.5× its, ``/health`` p50, p99 and p99.9 each ≤ its). The same
comparisons are given for greenfront launched by ``vllm serve`` (each ``--serve-workers``
column) as information. Whether 2 workers under ``vllm serve`` both serve with unchanged greedy
outputs is not a benchmark figure: ``make interop``'s drop-in tests check it.

Runs on: the benchmark orchestrator process (report rendering).
"""
from __future__ import annotations

from typing import Any, Callable

from bench.stats import cpu_per_1k_tokens

RUST = "vllm-rust"
HEALTH_QUANTILES = ("p50", "p99", "p99.9")

Add = Callable[[str, str, str, "bool | None"], None]


def _by_endpoint(results: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["endpoint"], p["scenario"]): p for p in results["phases"]}


def _reference(results: dict[str, Any]) -> str | None:
    for p in results["phases"]:
        if p["settings"].get("kind") == "greenfront" and p["settings"].get("reference"):
            return p["endpoint"]
    return None


def _serve_columns(results: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    for p in results["phases"]:
        if p["endpoint"].startswith("greenfront-vllm-serve") and p["endpoint"] not in seen:
            seen.append(p["endpoint"])
    return seen


def _stream(add: Add, name: str, gf: dict[str, Any], rs: dict[str, Any], judge: bool) -> None:
    g, r = gf["load"], rs["load"]
    ok = g["tokens_per_s"] >= r["tokens_per_s"]
    add(f"{name}, stream: tokens/s ≥ the Rust frontend's", "≥ 1.0×",
        f"{g['tokens_per_s']:,.0f} vs {r['tokens_per_s']:,.0f} "
        f"({g['tokens_per_s'] / max(r['tokens_per_s'], 1e-9):.2f}×)", ok if judge else None)
    gt, rt = g["ttft_ms"]["p50"], r["ttft_ms"]["p50"]
    add(f"{name}, stream: TTFT p50 ≤ 1.5× the Rust frontend's", "≤ 1.5×",
        f"{gt:.0f} vs {rt:.0f} ms ({gt / max(rt, 1e-9):.2f}×)",
        (gt <= 1.5 * rt) if judge else None)
    gc, rc = cpu_per_1k_tokens(gf), cpu_per_1k_tokens(rs)
    if gc is not None and rc is not None:
        add(f"{name}, stream: server CPU per 1k tokens ≤ 1.25× the Rust frontend's", "≤ 1.25×",
            f"{gc:.1f} vs {rc:.1f} ms ({gc / rc:.2f}×)", (gc <= 1.25 * rc) if judge else None)
    gh, rh = gf["health"]["latency_ms"]["p99.9"], rs["health"]["latency_ms"]["p99.9"]
    add(f"{name}, stream: /health p99.9 ≤ the Rust frontend's", "≤ 1.0×",
        f"{gh:.1f} vs {rh:.1f} ms", (gh <= rh) if judge else None)


def _long(add: Add, name: str, scenario: str, gf: dict[str, Any], rs: dict[str, Any],
          judge: bool) -> None:
    g, r = gf["load"]["req_per_s"], rs["load"]["req_per_s"]
    what = "long prompts" if scenario == "long" else "/tokenize"
    add(f"{name}, {what}: throughput ≥ 1.5× the Rust frontend's", "≥ 1.5×",
        f"{g:.1f} vs {r:.1f} req/s ({g / max(r, 1e-9):.2f}×)", (g >= 1.5 * r) if judge else None)
    gh, rh = gf["health"]["latency_ms"], rs["health"]["latency_ms"]
    cells = ", ".join(f"{q} {gh[q]:.1f} vs {rh[q]:.1f} ms" for q in HEALTH_QUANTILES)
    add(f"{name}, {what}: /health p50, p99, p99.9 each ≤ the Rust frontend's", "each ≤ 1.0×",
        cells, all(gh[q] <= rh[q] for q in HEALTH_QUANTILES) if judge else None)


def peer_targets(results: dict[str, Any], add: Add) -> None:
    """Add issues 11's and 26's rows (nothing when the run had no Rust frontend column)."""
    by = _by_endpoint(results)
    reference = _reference(results)
    columns = ([(reference, True)] if reference else []) + [
        (c, False) for c in _serve_columns(results)]
    for endpoint, judge in columns:
        name = "greenfront default" if judge else endpoint
        for scenario in ("long", "tokenize", "stream"):
            gf, rs = by.get((endpoint, scenario)), by.get((RUST, scenario))
            if gf is None or rs is None:
                continue
            if scenario == "stream":
                _stream(add, name, gf, rs, judge)
            else:
                _long(add, name, scenario, gf, rs, judge)
