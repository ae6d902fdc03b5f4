"""The agent APIs' streaming in the report: their tables and issue 22's targets.

``agent_tables(results)`` renders the ``stream-chat`` / ``stream-responses`` /
``stream-messages`` phases (one row per phase, in run order) and the APIs side by side (medians
over rounds); ``agent_targets(results, add)`` judges Responses' and Messages' tokens/s against
chat's: each phase against the mean of the chat phases just before and after it (the rounds of
``bench.plan.schedule``: chat opens every round and closes the run, because this machine's speed
drifts by up to 2x within a minute), the median round against 90%.

Runs on: the benchmark orchestrator process (report rendering).
"""
from __future__ import annotations

import statistics
from typing import Any, Callable

from bench.agent_streams import CHAT_SCENARIO, MESSAGES_SCENARIO, RESPONSES_SCENARIO
from bench.stats import cpu_per_1k_tokens

Add = Callable[[str, str, str, "bool | None"], None]
_OTHERS = ((RESPONSES_SCENARIO, "Responses"), (MESSAGES_SCENARIO, "Messages"))
_NAMES = {CHAT_SCENARIO: "chat", **dict(_OTHERS)}
#: tokens/s of Responses and Messages streams, as a share of chat's (issue 22)
GOAL = 0.9


def _ms(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:.2f} s"
    return f"{v:.0f} ms" if v >= 100 else f"{v:.1f} ms"


def _k(v: float) -> str:
    return f"{v / 1000:.1f}k"


def _phases(results: dict[str, Any], scenario: str) -> list[dict[str, Any]]:
    return [p for p in results["phases"] if p["scenario"] == scenario]


def pairs(results: dict[str, Any], scenario: str) -> list[tuple[dict, list[dict]]]:
    """(phase of ``scenario``, the chat phases it is judged against): those of its round and
    the next (before and after it); without rounds, every chat phase of the run."""
    chats = _phases(results, CHAT_SCENARIO)
    out = []
    for p in _phases(results, scenario):
        around = [c for c in chats if "round" in p
                  and c.get("round") in (p["round"], p["round"] + 1)] or chats
        if around:
            out.append((p, around))
    return out


def _ratios(found: list[tuple[dict, list[dict]]], figure: Callable[[dict], float | None]
            ) -> list[float]:
    out = []
    for p, chats in found:
        mine, theirs = figure(p), [figure(c) for c in chats]
        if mine is not None and None not in theirs and sum(theirs):
            out.append(mine / (sum(theirs) / len(theirs)))
    return out


def agent_targets(results: dict[str, Any], add: Add) -> None:
    """Issue 22: Responses' and Messages' streamed tokens/s each ≥ 90% of chat's, median round."""
    for scenario, name in _OTHERS:
        found = pairs(results, scenario)
        if not found:
            continue
        rates = _ratios(found, lambda p: p["load"]["tokens_per_s"])
        ratio = statistics.median(rates)
        each = ", ".join(f"{r:.1%}" for r in rates)
        measured = (f"median of {len(rates)} rounds (each against the chat phases before and "
                    f"after it): {ratio:.1%}; rounds {each}" if len(rates) > 1 else f"{ratio:.1%}")
        costs = _ratios(found, cpu_per_1k_tokens)
        if costs:
            measured += f"; server CPU per 1k tokens {statistics.median(costs):.2f}× chat's"
        if ratio < GOAL:
            measured += f": missed by {GOAL - ratio:.1%}"
        add(f"{name} streaming vs chat streaming (one deployment), tokens/s", "≥ 90%", measured,
            ratio >= GOAL)


def _phase_rows(results: dict[str, Any]) -> list[str]:
    rows = [p for p in results["phases"] if p["scenario"] in _NAMES]
    out = [("| phase | tokens/s | TTFT p50 | p99 | ITL mean | token gap p99 "
            "| tokens/event (counted) | ended before limit | /health p99.9 | errors "
            "| server CPU ms/1k tok |"), "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in rows:
        load, cpu = p["load"], cpu_per_1k_tokens(p)
        out.append(
            f"| {p['endpoint']} {_NAMES[p['scenario']]} | {_k(load['tokens_per_s'])} "
            f"| {_ms(load['ttft_ms']['p50'])} | {_ms(load['ttft_ms']['p99'])} "
            f"| {load['itl_stream_mean_ms']['mean']:.1f} ms | {_ms(load['itl_gap_ms']['p99'])} "
            f"| {load['tokens_per_event']:.2f} ({load.get('tokens_counted_share', 0.0):.0%}) "
            f"| {load.get('ended_before_limit', 0)} of {load['completed']} "
            f"| {_ms(p['health']['latency_ms']['p99.9'])} "
            f"| {load['errors'] + p['health']['errors']} "
            f"| {'—' if cpu is None else f'{cpu:.1f}'} |")
    return out


def _side_by_side(results: dict[str, Any]) -> list[str]:
    out = ["| API | tokens/s | ÷ chat | TTFT p50 | /health p99.9 | ÷ chat | server CPU ms/1k tok "
           "| ÷ chat | tokens/event |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for scenario, name in _NAMES.items():
        phases = _phases(results, scenario)
        if not phases:
            continue

        def med(f: Callable[[dict], float | None]) -> float | None:
            values = [v for v in map(f, phases) if v is not None]
            return statistics.median(values) if values else None
        rate, cpu = med(lambda p: p["load"]["tokens_per_s"]), med(cpu_per_1k_tokens)
        found = pairs(results, scenario) if scenario != CHAT_SCENARIO else []
        r_rate = _ratios(found, lambda p: p["load"]["tokens_per_s"])
        r_health = _ratios(found, lambda p: p["health"]["latency_ms"]["p99.9"])
        r_cpu = _ratios(found, cpu_per_1k_tokens)
        out.append(
            f"| {name} | {_k(rate)} "
            f"| {f'{statistics.median(r_rate):.1%}' if r_rate else '—'} "
            f"| {_ms(med(lambda p: p['load']['ttft_ms']['p50']))} "
            f"| {_ms(med(lambda p: p['health']['latency_ms']['p99.9']))} "
            f"| {f'{statistics.median(r_health):.2f}×' if r_health else '—'} "
            f"| {'—' if cpu is None else f'{cpu:.1f}'} "
            f"| {f'{statistics.median(r_cpu):.2f}×' if r_cpu else '—'} "
            f"| {med(lambda p: p['load']['tokens_per_event']):.1f} |")
    return out


def agent_tables(results: dict[str, Any]) -> list[str]:
    """The agent APIs' section of the report (nothing when none of their phases ran)."""
    chats = _phases(results, CHAT_SCENARIO)
    if not chats:
        return []
    first = chats[0]
    t, sim = first["timing"], first["sim"]
    return [
        (f"### Agent APIs' streaming: chat, Responses and Messages, {t['stream_concurrency']:,} "
         f"streams of 64–256 tokens each, simulator TTFT {sim['ttft_ms']:g} ms, "
         f"ITL {sim['itl_ms']:g} ms"), "",
        ("Side by side, medians over the phases; \"÷ chat\": the median round, each phase "
         "against the chat phases before and after it:"), "",
        *_side_by_side(results), "",
        *_phase_rows(results), "",
        ("Chat counts tokens from continuous usage stats; Responses and Messages one per text "
         "delta, reconciled with the final usage (tokens/event above 1: tokens without a delta "
         "of their own, or merged; \"counted\": the share a final usage confirmed). TTFT is the "
         "first text delta: in the simulator's echo mode a Responses stream's first text comes "
         "with its 3rd token and a Messages stream's with its 2nd (the echoed BOS and [INST] "
         "have no text), chat's first chunk with its 1st, so Responses' TTFT includes ~2 "
         "and Messages' ~1 step more of the simulator's."), ""]
