"""CPU per ``/health`` probe on a fresh connection: ``python -m bench.probe_cpu URL [URL ...]``.

Each URL is a running greenfront deployment with one worker (``GREENFRONT_WORKERS=1``), found by
its port. For ``--rounds`` rounds, deployments in turn (an alternated A/B), one client opens
``--probes`` connections one after another, each sending ``GET /health`` with
``Connection: close`` and reading to the close; the worker's CPU over the block is read from
``/proc`` (every thread's ``schedstat``, nanoseconds; the HTTP hub's thread alone beside it).
The worker is otherwise idle, so this is the per-connection cost of an idle-ish worker.

Runs on: its own process, one thread.
"""
from __future__ import annotations

import argparse
import os
import socket
import time
from urllib.parse import urlsplit


def worker_pid(port: int) -> int:
    """The gunicorn worker listening on ``port``: the process holding the listening socket that
    is a child of another holder (the master holds it too)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == "0A":
                    inodes.add(cols[9])
    holders = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    holders.add(int(pid))
                    break
        except OSError:
            continue
    workers = [pid for pid in holders if _ppid(pid) in holders]
    if len(workers) != 1:
        raise SystemExit(f"port {port}: expected one worker, found {workers} (GREENFRONT_WORKERS=1?)")
    return workers[0]


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def cpu_ns(pid: int) -> tuple[int, int]:
    """(all threads, the main thread) CPU time in ns."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            continue
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return total, int(f.read().split()[0])


def probe(host: str, port: int, path: str, count: int) -> int:
    """``count`` probes, one connection each; the number answered 200."""
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
    ok = 0
    for _ in range(count):
        with socket.create_connection((host, port)) as sock:
            sock.sendall(request)
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
        ok += data.startswith(b"HTTP/1.1 200 ")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("urls", nargs="+")
    parser.add_argument("--probes", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    targets = []
    for url in args.urls:
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        targets.append((url, host, port, parts.path or "/health", worker_pid(port)))
    for url, host, port, path, pid in targets:  # warm up: first-request imports, caches
        probe(host, port, path, 200)
    for round_ in range(1, args.rounds + 1):
        for url, host, port, path, pid in targets:
            before, before_main = cpu_ns(pid)
            t0 = time.monotonic()
            ok = probe(host, port, path, args.probes)
            wall = time.monotonic() - t0
            after, after_main = cpu_ns(pid)
            print(f"round {round_} {url} worker {pid}: {(after - before) / args.probes / 1e3:.1f} "
                  f"µs CPU per probe (hub thread {(after_main - before_main) / args.probes / 1e3:.1f}),"
                  f" {ok}/{args.probes} answered 200, {args.probes / wall:.0f} probes/s",
                  flush=True)


if __name__ == "__main__":
    main()
