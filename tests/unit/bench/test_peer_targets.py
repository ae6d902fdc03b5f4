"""``make bench``'s issue-26 streaming targets beside vLLM's Rust frontend (hand-made phase
results): tokens/s, TTFT p50 ≤ 1.5×, ``/health`` p99.9 and server CPU per 1k tokens ≤ 1.25×,
judged for greenfront's default configuration only."""
from __future__ import annotations

from typing import Any

from bench.peer_targets import RUST, peer_targets


def _stream(endpoint: str, tokens_per_s: float, ttft_ms: float, server_cpu_s: float | None,
            **settings: Any) -> dict[str, Any]:
    return {"endpoint": endpoint, "scenario": "stream", "settings": settings,
            "load": {"tokens_per_s": tokens_per_s, "ttft_ms": {"p50": ttft_ms}},
            "health": {"latency_ms": {"p99.9": 100.0}},
            "cpu_s": {"server": server_cpu_s, "window_s": 20.0}}


def _rows(*phases: dict[str, Any]) -> dict[str, tuple[str, bool | None]]:
    rows: dict[str, tuple[str, bool | None]] = {}
    peer_targets({"phases": list(phases)},
                 lambda name, goal, measured, met: rows.update({name: (measured, met)}))
    return rows


def _greenfront(tokens_per_s: float, ttft_ms: float, server_cpu_s: float | None) -> dict:
    return _stream("greenfront", tokens_per_s, ttft_ms, server_cpu_s, kind="greenfront",
                   reference=True)


CPU = "greenfront default, stream: server CPU per 1k tokens ≤ 1.25× the Rust frontend's"
TTFT = "greenfront default, stream: TTFT p50 ≤ 1.5× the Rust frontend's"


def test_cpu_per_token_within_a_quarter_of_the_rust_frontends_is_met() -> None:
    # 50k tokens/s for 20 s = 1M tokens: 24 s of CPU is 24 ms per 1k, 20 s is 20 ms per 1k.
    rows = _rows(_greenfront(50_000, 140, 24.0), _stream(RUST, 50_000, 100, 20.0))
    assert rows[CPU] == ("24.0 vs 20.0 ms (1.20×)", True)
    assert rows[TTFT] == ("140 vs 100 ms (1.40×)", True)


def test_cpu_per_token_beyond_a_quarter_and_slow_first_tokens_are_missed() -> None:
    rows = _rows(_greenfront(25_000, 160, 13.0), _stream(RUST, 50_000, 100, 20.0))
    assert rows[CPU] == ("26.0 vs 20.0 ms (1.30×)", False)
    assert rows[TTFT][1] is False


def test_no_cpu_row_when_a_servers_processes_are_unknown() -> None:
    rows = _rows(_greenfront(50_000, 100, None), _stream(RUST, 50_000, 100, 20.0))
    assert CPU not in rows and TTFT in rows


def test_vllm_serve_columns_are_information() -> None:
    serve = _stream("greenfront-vllm-serve-2w", 50_000, 100, 40.0, kind="greenfront")
    rows = _rows(_greenfront(50_000, 100, 20.0), serve, _stream(RUST, 50_000, 100, 20.0))
    name = "greenfront-vllm-serve-2w, stream: server CPU per 1k tokens ≤ 1.25× the Rust frontend's"
    assert rows[name] == ("40.0 vs 20.0 ms (2.00×)", None)
