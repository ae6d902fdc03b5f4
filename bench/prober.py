"""The ``/health`` prober: ``python -m bench.prober CONFIG.json OUT.json`` (its own process).

Owns the steady-rate probe: every ``1/rate`` seconds (open loop: a slow answer never delays the
next probe) it opens a new TCP connection, sends ``GET /health`` with ``Connection: close`` and
records the time from connect to the last byte, as a load balancer's or kubelet's health check
sees it (new connections also spread over all gunicorn workers). Every latency inside the window
is kept (the plots need the whole distribution); the prober's own lateness (how late it sent a
probe against its schedule) is reported too, so a starved prober cannot pass for a slow server.

Runs on: its own process, one thread, a ``bench.client.Loop``; pinned by the orchestrator.
"""
from __future__ import annotations

import json
import sys
from time import monotonic
from typing import Any
from urllib.parse import urlsplit

from bench.client import Connection, Exchange, Loop
from bench.stats import percentiles, write_result


class _Probe(Exchange):
    __slots__ = ("conn", "prober", "status", "t_start")

    def __init__(self, prober: _Prober, t_start: float) -> None:
        self.prober = prober
        self.t_start = t_start
        self.status = 0
        self.conn: Connection | None = None

    def on_head(self, status: int, t: float) -> None:
        self.status = status

    def on_done(self, t: float) -> None:
        if self.conn is not None:
            self.conn.close()
        self.prober.record(self.t_start, t, self.status)

    def on_error(self, reason: str, t: float) -> None:
        self.prober.record(self.t_start, t, 0, reason)


class _Prober:
    def __init__(self, cfg: dict[str, Any]) -> None:
        url = urlsplit(cfg["health_url"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        path = url.path or "/"
        self.request = (f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                        f"Connection: close\r\n\r\n").encode()
        self.loop = Loop()
        self.t0, self.t1 = cfg["t0"], cfg["t1"]
        self.interval = 1.0 / cfg["rate"]
        self.max_outstanding = cfg.get("max_outstanding", 2000)
        self.outstanding = 0
        self.samples: list[tuple[float, float, int]] = []  # (t since t0, latency ms, status)
        self.lateness: list[float] = []
        self.errors: dict[str, int] = {}
        self.skipped = 0

    def record(self, t_start: float, t_end: float, status: int, reason: str = "") -> None:
        self.outstanding -= 1
        if not self.t0 <= t_start <= self.t1:
            return
        self.samples.append((t_start - self.t0, (t_end - t_start) * 1000, status))
        if status != 200:
            key = reason or f"HTTP {status}"
            self.errors[key] = self.errors.get(key, 0) + 1

    def probe(self, scheduled: float, now: float) -> None:
        nxt = scheduled + self.interval
        if nxt < self.t1:
            self.loop.call_at(nxt, lambda t: self.probe(nxt, t))
        if self.t0 <= now <= self.t1:
            self.lateness.append((now - scheduled) * 1000)
        if self.outstanding >= self.max_outstanding:
            self.skipped += 1  # bounded: a dead server must not exhaust the prober's sockets
            return
        self.outstanding += 1
        exchange = _Probe(self, monotonic())
        try:
            conn = Connection(self.loop, self.host, self.port)
        except OSError as exc:
            exchange.on_error(f"connect: {exc.strerror or exc}", monotonic())
            return
        exchange.conn = conn
        conn.send(self.request, exchange)

    def run(self, t_begin: float) -> dict[str, Any]:
        self.loop.call_at(t_begin, lambda t: self.probe(t_begin, t))
        self.loop.run(self.t1)
        # Let the window's last probes finish: an inline server answers seconds late, and
        # dropping those would flatter its tail (bounded: a stuck server never answers).
        deadline = self.t1 + 10.0
        while self.outstanding > 0 and monotonic() < deadline:
            self.loop.run(min(deadline, monotonic() + 0.05))
        unanswered = self.outstanding
        self.loop.close()
        ok = sorted(lat for _, lat, status in self.samples if status == 200)
        return {
            "probes": len(self.samples) + unanswered, "ok": len(ok),
            "errors": len(self.samples) - len(ok) + unanswered + self.skipped,
            "error_kinds": self.errors, "unanswered": unanswered, "skipped": self.skipped,
            "latency_ms": percentiles(ok),
            "prober_lateness_ms": percentiles(sorted(self.lateness)),
            "samples": [(round(t, 4), round(lat, 3), status) for t, lat, status in self.samples],
        }


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        cfg = json.load(f)
    write_result(argv[1], _Prober(cfg).run(cfg["t_begin"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
