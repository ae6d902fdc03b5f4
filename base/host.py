"""Facts about the host this process runs on: usable CPUs, available memory, an address other
hosts reach it at, the worker count the defaults derive from them, and where a model id's files
are in its Hugging Face cache.

Runs on: any thread; import time of the gunicorn master and of each worker (through ``config``).
Reads ``/proc`` and ``/sys`` files, never ``os.environ`` (settings are ``config``'s).
"""
from __future__ import annotations

import functools
import os
import socket

#: Most workers the default picks: measured only up to 2 CPUs; the relay (engine.relay) sends
#: each engine step to every worker, so its work grows with their number.
WORKERS_CAP = 16
#: Memory to allow per worker when picking the default: ~75-100 MB private per worker after a
#: warm-up of 82k-token prompts (the tokenizers, ~260 MB, are shared from the master), with room
#: for request bodies in flight.
WORKER_MEMORY_BYTES = 256 << 20


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity, lowered by a cgroup v2 CPU quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo in bytes, or None where there is none."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def default_worker_count() -> int:
    """One worker per usable CPU (docs/deployment.md §2, how this was measured), at most
    ``WORKERS_CAP``, and no more than half the available memory holds."""
    workers = min(usable_cpus(), WORKERS_CAP)
    memory = available_memory()
    if memory is not None:
        workers = min(workers, max(1, memory // 2 // WORKER_MEMORY_BYTES))
    return workers


@functools.cache
def reachable_host() -> str:
    """An address of this host that other hosts can connect to: the one its default route
    leaves from (connecting a UDP socket sends nothing), else what the host name resolves to."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())


def local_model_dir(name: str, hub_cache: str) -> str:
    """A local directory for a model path or hub id: the path itself, or the id's snapshot in the
    Hugging Face cache ``hub_cache``. No network: an id resolves only if something (``vllm
    serve``) already downloaded it; otherwise it is returned unchanged and loading fails clearly."""
    if os.path.isdir(name):
        return os.path.abspath(name)
    repo = os.path.join(hub_cache, "models--" + name.replace("/", "--"))
    try:
        with open(os.path.join(repo, "refs", "main")) as f:
            snapshot = os.path.join(repo, "snapshots", f.read().strip())
        if os.path.isdir(snapshot):
            return snapshot
    except OSError:
        pass
    snapshots = os.path.join(repo, "snapshots")
    if os.path.isdir(snapshots):
        for entry in sorted(os.listdir(snapshots)):
            return os.path.join(snapshots, entry)
    return name
