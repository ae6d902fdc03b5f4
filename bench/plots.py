"""PNG plots of a benchmark run (matplotlib, headless ``Agg`` backend).

Owns, per scenario that ran: ``health_<scenario>.png`` (the ``/health`` latency distribution of
every configuration as a percentile curve: x = percentile on a "nines" scale, y = latency, both
logarithmic, so p50 and p99.9 are equally readable), ``health_timeline_<scenario>.png`` (one
panel per configuration: every probe's latency over the window, which shows stalls a percentile
hides) and ``throughput.png`` (bars: completions/s, /tokenize calls/s, streamed tokens/s, with
the tokenizer limit drawn as a line where it applies).

Runs on: the benchmark orchestrator process, after the phases.
"""
from __future__ import annotations

import math
import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

_SCENARIO_TITLES = {"long": "long prompts (/v1/completions)", "tokenize": "long prompts (/tokenize)",
                    "stream": "short streaming", "embed": "embeddings (float)",
                    "embed-base64": "embeddings (base64)"}


def _health_curve(phases: list[dict[str, Any]], scenario: str, path: str) -> None:
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for p in phases:
        lat = sorted(s[1] for s in p["health"]["samples"] if s[2] == 200)
        if not lat:
            continue
        n = len(lat)
        # x: -log10(1 - q): 1 = p90, 2 = p99, 3 = p99.9.
        xs = [-math.log10(1 - (i + 0.5) / n) for i in range(n)]
        ax.plot(xs, lat, label=p["endpoint"], linewidth=1.6)
    ax.set_yscale("log")
    ticks = [0, 1, 2, 3, 4]
    ax.set_xticks(ticks, ["p0", "p90", "p99", "p99.9", "p99.99"])
    ax.set_xlim(0, 3.5)
    ax.set_xlabel("percentile")
    ax.set_ylabel("/health latency (ms, log)")
    ax.set_title(f"/health latency distribution under {_SCENARIO_TITLES.get(scenario, scenario)}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _health_timeline(phases: list[dict[str, Any]], scenario: str, path: str) -> None:
    cols = 2 if len(phases) > 1 else 1
    rows = math.ceil(len(phases) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 2.4 * rows), squeeze=False,
                             sharey=True)
    for ax, p in zip(axes.flat, phases):
        samples = p["health"]["samples"]
        ax.scatter([s[0] for s in samples], [max(s[1], 0.01) for s in samples], s=2,
                   c=["tab:blue" if s[2] == 200 else "tab:red" for s in samples])
        ax.set_yscale("log")
        ax.set_title(p["endpoint"], fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes.flat[len(phases):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("ms (log)")
    for ax in axes[-1, :]:
        ax.set_xlabel("seconds into the window")
    fig.suptitle(f"/health latency of every probe: {_SCENARIO_TITLES.get(scenario, scenario)}")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _throughput(results: dict[str, Any], path: str) -> bool:
    panels = []
    for scenario, key, unit in (("long", "req_per_s", "completions/s"),
                                ("tokenize", "req_per_s", "calls/s"),
                                ("stream", "tokens_per_s", "tokens/s")):
        phases = [p for p in results["phases"] if p["scenario"] == scenario]
        if phases:
            panels.append((scenario, key, unit, phases))
    limits = results.get("limits", [])
    if not panels and not limits:
        return False
    n = len(panels) + (1 if limits else 0)
    fig, axes = plt.subplots(1, n, figsize=(max(6, 4.8 * n), 5.2), squeeze=False)
    for ax, (scenario, key, unit, phases) in zip(axes[0], panels):
        labels = [p["endpoint"] for p in phases]
        bars = ax.bar(range(len(phases)), [p["load"][key] for p in phases], color="tab:green")
        ax.bar_label(bars, fmt="{:,.1f}" if key == "req_per_s" else "{:,.0f}", fontsize=7)
        ax.set_xticks(range(len(phases)), labels, rotation=40, ha="right", fontsize=8)
        ax.set_ylabel(unit)
        ax.set_title(_SCENARIO_TITLES[scenario], fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    if limits:
        ax = axes[0][-1]
        labels = [f"{lim['backend']} ×{lim['threads']}" for lim in limits]
        bars = ax.bar(range(len(limits)), [lim["prompts_per_s"] for lim in limits], color="tab:gray")
        ax.bar_label(bars, fmt="{:,.1f}", fontsize=7)
        ax.set_xticks(range(len(limits)), labels, rotation=40, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("prompts/s (log)")
        ax.set_title("tokenizer limit (no server)", fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def draw(results: dict[str, Any], out_dir: str) -> list[str]:
    """Draw every plot the run has data for; return the file names (relative to ``out_dir``)."""
    names = []
    if _throughput(results, os.path.join(out_dir, "throughput.png")):
        names.append("throughput.png")
    for scenario in ("long", "tokenize", "stream", "embed", "embed-base64"):
        phases = [p for p in results["phases"] if p["scenario"] == scenario]
        if not phases:
            continue
        _health_curve(phases, scenario, os.path.join(out_dir, f"health_{scenario}.png"))
        _health_timeline(phases, scenario, os.path.join(out_dir, f"health_timeline_{scenario}.png"))
        names += [f"health_{scenario}.png", f"health_timeline_{scenario}.png"]
    return names
