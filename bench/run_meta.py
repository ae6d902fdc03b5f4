"""What a benchmark run records about itself: the machine, the commit, the load at its edges.

Runs on: the benchmark orchestrator process.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import platform
import subprocess
import sys
import time

from bench.deploy import ROOT, parse_cpus
from bench.scenarios import SimProfile


def machine() -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (f"{model}, {os.cpu_count()} CPUs, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def busy_processes() -> list[str]:
    """Other CPU-heavy processes right now (a benchmark on a busy machine is not comparable)."""
    def ticks() -> dict[int, tuple[int, str]]:
        out = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{entry}/stat") as f:
                        head, rest = f.read().rsplit(")", 1)
                    fields = rest.split()
                    out[int(entry)] = (int(fields[11]) + int(fields[12]), head.split("(", 1)[1])
        return out
    before = ticks()
    time.sleep(1.0)
    after = ticks()
    hz = os.sysconf("SC_CLK_TCK")
    return [f"{name} (pid {pid}, {(t - before[pid][0]) / hz:.0%})"
            for pid, (t, name) in after.items()
            if pid in before and pid != os.getpid() and (t - before[pid][0]) / hz > 0.1]


def loadavg() -> str:
    """The machine's load average: on a shared machine, how crowded the run was."""
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def commit() -> str:
    """HEAD, plus a digest of uncommitted server changes (bench/ excluded): if it differs at the
    end of the run, the code under test changed while it was measured."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip()
    try:
        sha = git("rev-parse", "--short", "HEAD")
        diff = git("diff", "HEAD", "--", ".", ":(exclude)bench")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not sha:
        return "unknown"
    return f"{sha} + uncommitted changes {hashlib.sha1(diff.encode()).hexdigest()[:8]}" if diff else sha


def meta(args: argparse.Namespace, argv: list[str], stamp: str, sim: SimProfile) -> dict:
    """The run's description; warns when other processes use the CPU as it starts."""
    busy = busy_processes()
    if busy:
        print("warning: other processes are using the CPU, figures will not be comparable: "
              + ", ".join(busy), file=sys.stderr)
    return {
        "timestamp": stamp, "command": "python -m bench " + " ".join(argv),
        "machine": machine(), "commit": commit(), "mode": args.mode,
        "pinning": (f"server (gunicorn master + workers, or the target frontend) on CPUs "
                    f"{args.server_cpus}; simulator, load generator and prober on CPUs "
                    f"{args.client_cpus} (os.sched_setaffinity, as `taskset -c`)"),
        "sim_args": sim.args, "server_cpus": sorted(parse_cpus(args.server_cpus)),
        "client_cpus": sorted(parse_cpus(args.client_cpus)), "loadavg_start": loadavg(),
        "busy_at_start": busy}
