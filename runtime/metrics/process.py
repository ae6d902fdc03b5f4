"""``process_*`` metrics of the whole frontend: the gunicorn master and every worker it forked.

prometheus-client's own ProcessCollector reports the process that answers the scrape; with
several workers that would be a different process per scrape. This one reads ``/proc`` for the
master (this worker's parent) and its children that run the same program (the workers; the
simulator and the handshake server are other programs and are left out, as vLLM's API-server
metrics leave its engine processes out): memory, CPU and file descriptors summed, the master's
start time, this worker's descriptor limit. A worker that exits takes its CPU seconds with it, so
``process_cpu_seconds_total`` falls then (Prometheus' rate() takes it as a counter reset).

Runs on: a request-pool thread (the scrape).
"""
from __future__ import annotations

import os
from typing import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def frontend_pids() -> list[int]:
    """The master and its workers; just this process when it was not forked by a master."""
    me, parent = os.getpid(), os.getppid()
    try:
        program = _read(f"/proc/{parent}/cmdline")
        if _read(f"/proc/{me}/cmdline") != program:
            return [me]
        children = _read(f"/proc/{parent}/task/{parent}/children").split()
    except OSError:
        return [me]
    pids = [parent]
    for child in children:
        try:
            if _read(f"/proc/{int(child)}/cmdline") == program:
                pids.append(int(child))
        except OSError:
            continue  # exited meanwhile
    return pids


def _boot_time() -> float:
    for line in _read("/proc/stat").splitlines():
        if line.startswith(b"btime "):
            return float(line.split()[1])
    return 0.0


class DeploymentProcessCollector:
    """A prometheus-client collector (``collect``) with ProcessCollector's names and help."""

    def collect(self) -> Iterator[Metric]:
        vmem = rss = cpu = fds = 0.0
        start = None
        for pid in frontend_pids():
            try:
                parts = _read(f"/proc/{pid}/stat").split(b")")[-1].split()
                open_fds = len(os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                continue
            vmem += float(parts[20])
            rss += float(parts[21]) * _PAGE
            cpu += (float(parts[11]) + float(parts[12])) / _TICKS
            fds += open_fds
            if start is None:  # the first is the master (or this process)
                start = float(parts[19]) / _TICKS
        if start is None:
            return
        yield GaugeMetricFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                                value=vmem)
        yield GaugeMetricFamily("process_resident_memory_bytes", "Resident memory size in bytes.",
                                value=rss)
        yield GaugeMetricFamily("process_start_time_seconds",
                                "Start time of the process since unix epoch in seconds.",
                                value=start + _boot_time())
        yield CounterMetricFamily("process_cpu_seconds_total",
                                  "Total user and system CPU time spent in seconds.", value=cpu)
        yield GaugeMetricFamily("process_open_fds", "Number of open file descriptors.", value=fds)
        for line in _read("/proc/self/limits").splitlines():
            if line.startswith(b"Max open file"):
                yield GaugeMetricFamily("process_max_fds", "Maximum number of open file "
                                        "descriptors.", value=float(line.split()[3]))
                break
