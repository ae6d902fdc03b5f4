"""Short streamed requests at a fixed rate, and a worker's CPU per request from ``/proc``.

``python -m bench.short_requests --target URL=PID [--target URL=PID ...] --rate R``

Measures a new request's HTTP path (issue 26, bench/RESULTS.md §6.2.1): open loop, ``R``
requests a second per target over ``--conns`` keep-alive connections, each request a stream of
``--max-tokens`` tokens (``ignore_eos``), alternating ``/v1/completions`` and
``/v1/chat/completions``. With several targets the requests go to each in turn, so every target
gets the same rate at the same time (a concurrent A/B on a noisy machine). For each window the
report is, per target: requests finished, errors, and the CPU of ``PID`` (a gunicorn worker;
utime + stime, threads included) per finished request. A request due while every connection of
its target is busy is counted as ``late`` and sent when one frees up.

Runs on: its own process, one thread (a ``bench.client.Loop``).
"""
from __future__ import annotations

import argparse
import json
import sys
from time import monotonic
from urllib.parse import urlsplit

from bench.client import Connection, Exchange, Loop
from bench.deploy import cpu_seconds

_BODIES = {
    "/v1/completions": {"prompt": "Say something short", "stream": True, "ignore_eos": True},
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "Say something short"}],
                             "stream": True, "ignore_eos": True},
}


class _Target:
    def __init__(self, loop: Loop, url: str, pid: int, conns: int, model: str,
                 max_tokens: int) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.pid = parts.hostname, parts.port, pid
        self.loop = loop
        self.idle = [Connection(loop, self.host, self.port) for _ in range(conns)]
        self.requests = []
        for path, body in _BODIES.items():
            raw = json.dumps(dict(body, model=model, max_tokens=max_tokens)).encode()
            self.requests.append(
                (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                 f"Content-Type: application/json\r\nAccept: */*\r\n"
                 f"Content-Length: {len(raw)}\r\n\r\n").encode() + raw)
        self.sent = self.done = self.errors = self.late = 0
        self.backlog = 0

    def send(self) -> None:
        if not self.idle:
            self.late += 1
            self.backlog += 1
            return
        conn = self.idle.pop()
        if conn.closed:
            conn = Connection(self.loop, self.host, self.port)
        raw = self.requests[self.sent % len(self.requests)]
        self.sent += 1
        conn.send(raw, _Answer(self, conn))

    def finished(self, conn: Connection, ok: bool) -> None:
        if ok:
            self.done += 1
        else:
            self.errors += 1
        self.idle.append(conn)
        if self.backlog:
            self.backlog -= 1
            self.send()


class _Answer(Exchange):
    __slots__ = ("target", "conn", "status")

    def __init__(self, target: _Target, conn: Connection) -> None:
        self.target, self.conn, self.status = target, conn, 0

    def on_head(self, status: int, t: float) -> None:
        self.status = status

    def on_done(self, t: float) -> None:
        self.target.finished(self.conn, self.status == 200)

    def on_error(self, reason: str, t: float) -> None:
        self.target.finished(self.conn, False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", action="append", required=True,
                        help="URL=PID: the server and the worker whose CPU is read")
    parser.add_argument("--rate", type=float, default=300.0, help="requests/s per target")
    parser.add_argument("--conns", type=int, default=128, help="connections per target")
    parser.add_argument("--max-tokens", type=int, default=2)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before the windows")
    parser.add_argument("--window", type=float, default=10.0, help="seconds per window")
    parser.add_argument("--windows", type=int, default=3)
    args = parser.parse_args(argv)
    loop = Loop()
    targets = []
    for spec in args.target:
        url, pid = spec.rsplit("=", 1)
        targets.append(_Target(loop, url, int(pid), args.conns, args.model, args.max_tokens))
    interval = 1.0 / (args.rate * len(targets))
    start = monotonic()
    ticks = [0]

    def tick(now: float) -> None:
        targets[ticks[0] % len(targets)].send()
        ticks[0] += 1
        loop.call_at(start + ticks[0] * interval, tick)

    loop.call_at(start, tick)
    loop.run(start + args.warmup)
    for window in range(args.windows):
        before = [(t.done, t.errors, t.late, cpu_seconds([t.pid]).get(t.pid, 0.0))
                  for t in targets]
        t0 = monotonic()
        loop.run(t0 + args.window)
        elapsed = monotonic() - t0
        for target, (done, errors, late, cpu) in zip(targets, before):
            n = target.done - done
            used = cpu_seconds([target.pid]).get(target.pid, 0.0) - cpu
            print(f"window {window} {target.host}:{target.port} pid {target.pid}: "
                  f"{n / elapsed:.0f} req/s, errors {target.errors - errors}, "
                  f"late {target.late - late}, worker CPU {used / elapsed * 100:.0f}%, "
                  f"{used / n * 1e6 if n else 0:.0f} us per request", flush=True)
    loop.close()


if __name__ == "__main__":
    sys.exit(main())
