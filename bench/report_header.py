"""The head of the benchmark's report: what ran where, and the warnings that qualify its figures.

Runs on: the benchmark orchestrator process (report rendering).
"""
from __future__ import annotations

from typing import Any


def phase_id(p: dict[str, Any]) -> str:
    return f"{p['endpoint']}.{p['scenario']}"


def header(results: dict[str, Any]) -> list[str]:
    """The title, the run's description and its notes and warnings (a crowded load side, other
    processes on the CPU, code that changed during the run)."""
    meta = results["meta"]
    lines = [f"# greenfront benchmark, {meta['timestamp']}", "",
             f"- Command: `{meta['command']}`",
             f"- Machine: {meta['machine']}",
             f"- Code: {meta['commit']}",
             f"- Pinning: {meta['pinning']}",
             f"- Load average (1, 5, 15 min) at the start: {meta.get('loadavg_start', '?')}, "
             f"at the end: {meta.get('loadavg_end', '?')}",
             f"- Engine: built-in simulator `{meta['sim_args']}` (its CPU: \"Load side\" below)"]
    if meta.get("code_changed_during_run"):
        lines.append(f"- **Warning**: the code changed during the run (at the end: "
                     f"{meta['code_changed_during_run']}); configurations measured before and "
                     f"after are not comparable")
    noisy = [phase_id(p) for p in results["phases"]
             if p["cpu_s"].get("other", 0) / p["cpu_s"]["window_s"] > 0.15
             and p["settings"].get("kind") != "external"]
    noisy += [f"limit {lim['backend']} x{lim['threads']}" for lim in results.get("limits", [])
              if lim.get("other_cpu_share", 0) > 0.15]
    cores = max(1, len(meta.get("client_cpus", [1])))

    def client_share(p: dict[str, Any]) -> float:
        c = p["cpu_s"]
        return (c["engine"] + c["loadgen"] + c["prober"]) / c["window_s"] / cores
    crowded = [f"{phase_id(p)} ({client_share(p):.0%})" for p in results["phases"]
               if client_share(p) > 0.75]
    if crowded:
        lines.append(f"- **Note**: the simulator, load generator and prober together used over 75% "
                     f"of their core(s) in: {', '.join(crowded)}; there the load side, not the "
                     f"frontend, may bound the figures")
    if noisy:
        lines.append(f"- **Warning**: other processes took over 15% of a core during: "
                     f"{', '.join(noisy)} (see the \"other CPU\" columns); those figures are low")
    if meta.get("busy_at_start"):
        lines.append(f"- **Warning**: other processes used the CPU when the run started: "
                     f"{', '.join(meta['busy_at_start'])}")
    return lines
