"""``python -m bench --soak``: mixed load against one deployment for a long time; does it hold?

One greenfront deployment (its default configuration on the simulator) takes ``clients``
closed-loop clients for ``duration`` seconds, each picking its next request at random:

  ``stream``      a streamed chat or completion, 16-128 tokens, read to ``[DONE]``
  ``complete``    a non-streamed completion
  ``long``        a ~30k-character prompt, 4 tokens
  ``tokenize``    /tokenize, then /detokenize of the ids
  ``generate``    /inference/v1/generate (token ids in and out)
  ``disconnect``  a stream the client drops after its first bytes (injected)
  ``bad``         a malformed request (injected: it must get a 4xx in OpenAI's envelope)

while a prober GETs ``/health`` every 100 ms. Reported: RSS of every process of the deployment
after the warm-up and at the end (and sampled every 5 s), errors beyond the injected faults (a
5xx, a broken stream, a refused or reset connection, a bad request that did not get a 4xx),
requests left in the engine once the load stopped (the engine's own running/waiting gauges),
and the ``/health`` latencies of the last minute.

Runs on: the benchmark orchestrator (client and prober threads; the server is a subprocess).
"""
from __future__ import annotations

import http.client
import json
import os
import random
import re
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.deploy import Endpoint
from tests.support.processes import cmdline

MIX = {"stream": 30, "complete": 15, "long": 8, "tokenize": 10, "generate": 10,
       "disconnect": 12, "bad": 15}
INJECTED = ("disconnect", "bad")
BAD_BODIES = [
    (b'{"model":"tiny","prompt":"hi",', "/v1/completions"),
    (b'{"prompt":"hi","max_tokens":-1}', "/v1/completions"),
    (b'{"prompt":"hi","temperature":"hot"}', "/v1/completions"),
    (b'{"messages":[{"role":"user","content":[{"type":"text","text":true}]}]}', "/tokenize"),
    (b'{"messages":"hi"}', "/v1/chat/completions"),
    (b'{"tokens":[4294967296]}', "/detokenize"),
    (b'{"token_ids":[],"sampling_params":{}}', "/inference/v1/generate"),
    (b"[1,2]", "/v1/completions"),
    (b'{"prompt":[1,131072]}', "/v1/completions"),
    (b'{"prompt":"x","stream":true,"n":0}', "/v1/completions"),
]
_GAUGE = re.compile(rb"^vllm:num_requests_(?:running|waiting)\{[^}]*\} ([0-9.e+-]+)$", re.M)


@dataclass
class Tally:
    """Outcomes of the clients' requests; ``errors`` keeps the first few in full."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    counts: Counter = field(default_factory=Counter)
    errors: list = field(default_factory=list)

    def ok(self, kind: str) -> None:
        with self.lock:
            self.counts[kind] += 1

    def error(self, kind: str, what: str) -> None:
        with self.lock:
            self.counts["error"] += 1
            if len(self.errors) < 20:
                self.errors.append(f"{kind}: {what[:300]}")


def _conn(host: str, port: int) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(host, port, timeout=120)


def _post(conn: http.client.HTTPConnection, path: str, body: bytes) -> http.client.HTTPResponse:
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    return conn.getresponse()


def _check_stream(raw: bytes) -> str | None:
    """None when a complete stream ended with ``[DONE]`` and carried no error event."""
    events = [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")]
    if not events or events[-1] != b"[DONE]":
        return f"stream did not end with [DONE]: ...{raw[-200:]!r}"
    for data in events[:-1]:
        if b'"error"' in data and "error" in json.loads(data):
            return f"error event: {data[:200]!r}"
    return None


class Client(threading.Thread):
    """One closed-loop client on its own keep-alive connection."""

    def __init__(self, endpoint: Endpoint, seed: int, stop: threading.Event, tally: Tally,
                 long_prompt: str) -> None:
        super().__init__(daemon=True)
        self.host, self.port = endpoint.host_port
        self.rng = random.Random(seed)
        self.stop, self.tally, self.long_prompt = stop, tally, long_prompt
        self.conn = _conn(self.host, self.port)
        self.kinds = [k for k, w in MIX.items() for _ in range(w)]

    def run(self) -> None:
        while not self.stop.is_set():
            kind = self.rng.choice(self.kinds)
            try:
                problem = getattr(self, "_" + kind)()
            except (OSError, http.client.HTTPException, ValueError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
                self.conn.close()
                self.conn = _conn(self.host, self.port)
            if problem:
                self.tally.error(kind, problem)
            else:
                self.tally.ok(kind)

    def _expect(self, path: str, body: dict, status: int = 200) -> tuple[str | None, bytes]:
        resp = _post(self.conn, path, json.dumps(body).encode())
        raw = resp.read()
        if resp.status != status:
            return f"{path}: {resp.status} {raw[:200]!r}", raw
        return None, raw

    def _text(self) -> str:
        words = ["alpha", "beta", "gamma", "delta", "soak", "the", "of", "é", "数据", "🙂"]
        return " ".join(self.rng.choice(words) for _ in range(self.rng.randint(3, 40)))

    def _stream(self) -> str | None:
        tokens = self.rng.randint(16, 128)
        if self.rng.random() < 0.5:
            path, body = "/v1/completions", {"prompt": self._text()}
        else:
            path, body = "/v1/chat/completions", {
                "messages": [{"role": "user", "content": self._text()}]}
        body.update(model="tiny", stream=True, max_tokens=tokens, ignore_eos=True,
                    stream_options={"include_usage": True})
        problem, raw = self._expect(path, body)
        return problem or _check_stream(raw)

    def _complete(self) -> str | None:
        return self._expect("/v1/completions", {"model": "tiny", "prompt": self._text(),
                                                "max_tokens": self.rng.randint(1, 32)})[0]

    def _long(self) -> str | None:
        prompt = f"{self.rng.random()} {self.long_prompt}"  # distinct: no prefix-cache effect
        return self._expect("/v1/completions", {"model": "tiny", "prompt": prompt,
                                                "max_tokens": 4})[0]

    def _tokenize(self) -> str | None:
        problem, raw = self._expect("/tokenize", {"model": "tiny", "prompt": self._text()})
        if problem:
            return problem
        return self._expect("/detokenize", {"model": "tiny",
                                            "tokens": json.loads(raw)["tokens"]})[0]

    def _generate(self) -> str | None:
        ids = [self.rng.randint(1000, 131071) for _ in range(self.rng.randint(1, 64))]
        return self._expect("/inference/v1/generate", {
            "model": "tiny", "token_ids": ids, "stream": self.rng.random() < 0.5,
            "sampling_params": {"max_tokens": self.rng.randint(1, 32)}})[0]

    def _disconnect(self) -> str | None:
        """Start a long stream on a fresh connection and drop it after the first bytes."""
        body = json.dumps({"model": "tiny", "prompt": self._text(), "stream": True,
                           "max_tokens": 2000, "ignore_eos": True}).encode()
        with socket.create_connection((self.host, self.port), timeout=60) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: "
                         b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            head = sock.recv(4096)
        if not head.startswith(b"HTTP/1.1 200"):
            return f"disconnect: {head[:200]!r}"
        return None

    def _bad(self) -> str | None:
        body, path = self.rng.choice(BAD_BODIES)
        resp = _post(self.conn, path, body)
        raw = resp.read()
        error = json.loads(raw).get("error") if raw.startswith(b"{") else None
        if not (400 <= resp.status < 500 and isinstance(error, dict)
                and error.get("code") == resp.status):
            return f"{path} {body[:80]!r}: {resp.status} {raw[:200]!r}"
        return None


class Prober(threading.Thread):
    """``/health`` every ``interval`` seconds on a fresh connection: (t, latency ms, status)."""

    def __init__(self, endpoint: Endpoint, stop: threading.Event, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.host, self.port = endpoint.host_port
        self.stop, self.interval = stop, interval
        self.samples: list[tuple[float, float, int]] = []

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            started = time.monotonic()
            conn = _conn(self.host, self.port)
            try:
                conn.request("GET", "/health")
                resp = conn.getresponse()
                resp.read()
                status = resp.status
            except (OSError, http.client.HTTPException):
                status = 0
            finally:
                conn.close()
            self.samples.append((started, (time.monotonic() - started) * 1000, status))


def rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def process_names(endpoint: Endpoint) -> dict[int, str]:
    """Each process of the deployment by role: master, worker, handshake, simulator."""
    names = {}
    pids = endpoint.server_pids()
    for pid in pids + endpoint.engine_pids():
        cmd = cmdline(pid)
        role = ("simulator" if "engine.sim" in cmd else "handshake" if "handshake" in cmd
                else "master" if pid == pids[0] else "worker")
        names[pid] = f"{role} {pid}"
    return names


def engine_requests(endpoint: Endpoint) -> float:
    """Requests the engines report running or waiting (their scheduler stats, via /metrics)."""
    conn = _conn(*endpoint.host_port)
    try:
        conn.request("GET", "/metrics")
        return sum(float(v) for v in _GAUGE.findall(conn.getresponse().read()))
    finally:
        conn.close()


def _left_in_engine(endpoint: Endpoint, settle_s: float = 30.0) -> float:
    """Engine requests once the load stopped: polled until 0 (aborts travel asynchronously)."""
    deadline = time.monotonic() + settle_s
    left = engine_requests(endpoint)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = engine_requests(endpoint)
    return left


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": pick(0.5), "p99": pick(0.99), "p99.9": pick(0.999), "max": ordered[-1]}


def run_soak(endpoint: Endpoint, duration: float, warmup: float, clients: int,
             seed: int = 0, progress=print) -> dict[str, Any]:
    """Drive the mixed load; returns the figures (see the module docstring)."""
    stop, tally = threading.Event(), Tally()
    long_prompt = " ".join(f"w{i % 997}" for i in range(6000))  # ~30k characters
    names = process_names(endpoint)
    workers = [Client(endpoint, seed + i, stop, tally, long_prompt) for i in range(clients)]
    prober = Prober(endpoint, stop)
    started = time.monotonic()
    for thread in [prober, *workers]:
        thread.start()
    series: list[dict] = []
    warm: dict[str, int] = {}
    while (now := time.monotonic() - started) < duration:
        time.sleep(min(5.0, max(0.0, duration - now)))
        sample = {name: rss_kib(pid) for pid, name in names.items()}
        series.append({"t": round(time.monotonic() - started, 1), "rss_kib": sample})
        if not warm and time.monotonic() - started >= warmup:
            warm = sample
            progress(f"soak: warm-up done at {series[-1]['t']:.0f} s, RSS {sample}")
    stop.set()
    for thread in workers:
        thread.join(timeout=150)
    prober.join(timeout=10)
    end = series[-1]["rss_kib"]
    left = _left_in_engine(endpoint)
    tail_from = prober.samples[-1][0] - 60 if prober.samples else 0
    tail = [s for s in prober.samples if s[0] >= tail_from]
    return {
        "duration_s": duration, "warmup_s": warmup, "clients": clients, "mix": MIX,
        "requests": dict(tally.counts), "errors": tally.counts["error"],
        "error_examples": tally.errors, "injected": {k: tally.counts[k] for k in INJECTED},
        "rss_warm_kib": warm, "rss_end_kib": end,
        "rss_growth": {name: (end[name] - warm[name]) / warm[name]
                       for name in end if warm.get(name) and end[name]},
        "rss_series": series, "left_in_engine": left,
        "health": {"probes": len(prober.samples),
                   "non_200": sum(1 for s in prober.samples if s[2] != 200),
                   "tail_60s_ms": _percentiles([s[1] for s in tail]),
                   "tail_non_200": sum(1 for s in tail if s[2] != 200),
                   "all_ms": _percentiles([s[1] for s in prober.samples])},
    }


def report(result: dict[str, Any], meta: dict[str, Any]) -> str:
    """The soak's Markdown report."""
    lines = [f"# Soak: {result['duration_s']:.0f} s of mixed load, {result['clients']} clients",
             "", f"- command: `{meta['command']}`; commit {meta['commit']}",
             f"- machine: {meta['machine']}",
             f"- other CPU-heavy processes at the start: {', '.join(meta['busy']) or 'none'}",
             f"- mix (weights): {', '.join(f'{k} {v}' for k, v in result['mix'].items())}",
             "", "| process | RSS after warm-up (MiB) | RSS at the end (MiB) | growth |",
             "|---|---:|---:|---:|"]
    for name, end in result["rss_end_kib"].items():
        warm = result["rss_warm_kib"].get(name)
        growth = result["rss_growth"].get(name)
        lines.append(f"| {name} | {warm / 1024 if warm else float('nan'):.1f} | "
                     f"{end / 1024 if end else float('nan'):.1f} | "
                     f"{'n/a' if growth is None else f'{growth:+.1%}'} |")
    done = {k: v for k, v in result["requests"].items() if k != "error"}
    health = result["health"]
    tail = health["tail_60s_ms"]
    lines += ["", f"- requests: {sum(done.values())} as expected ("
              + ", ".join(f"{k} {v}" for k, v in sorted(done.items())) + ")",
              f"- errors beyond the injected faults: {result['errors']}",
              *[f"  - {e}" for e in result["error_examples"]],
              f"- requests left in the engine after the load: {result['left_in_engine']:g}",
              f"- `/health`: {health['probes']} probes, {health['non_200']} not 200; last 60 s "
              + (f"p50 {tail['p50']:.1f} ms, p99 {tail['p99']:.1f} ms, max {tail['max']:.1f} ms"
                 if tail else "no probes")]
    return "\n".join(lines) + "\n"
