"""The load generator: ``python -m bench.loadgen CONFIG.json OUT.json`` (its own process).

Owns the two load shapes of the benchmark, both closed-loop over keep-alive connections:

* ``long``: C clients, each sends a distinct ~300k-character prompt (``bench.textgen``) to
  ``/v1/completions`` (a few output tokens) or ``/tokenize`` and sends the next one as soon as
  the answer arrives, each on a fresh connection: with several gunicorn workers, kept-alive
  connections would stay with whichever worker accepted them first (often all with one), while
  a new connection goes to a worker that is free to accept it. Records, per request finished
  inside the window: latency, status, prompt tokens (from ``usage.prompt_tokens`` or ``count``).
* ``stream``: N keep-alive connections (opened over ``ramp_s``), each streaming a short prompt with
  ``max_tokens`` drawn from [min, max] and ``ignore_eos``; records time to first token, the
  gap before each token (per token: a chunk carrying k tokens counts once as its gap and k-1
  times as 0), and the tokens that arrived inside the window. Tokens per chunk are counted from
  the cumulative ``completion_tokens`` of continuous usage stats (``tokens_counted_share`` says
  how many a frontend without them forced to assume one per chunk). With ``api`` (the agent
  scenarios, ``bench.agent_streams``): chat, Responses or Messages requests; Responses and
  Messages streams count one token per text delta, reconciled with their final usage.

The window ``[t0, t1]`` (monotonic clock, shared by every process on the machine) is set by the
orchestrator, which reads the server's CPU at the same instants.

Runs on: its own process, one thread, a ``bench.client.Loop``; pinned by the orchestrator.
"""
from __future__ import annotations

import json
import random
import re
import resource
import sys
from array import array
from time import monotonic
from typing import Any

from bench.agent_streams import BY_NAME, StreamApi, account_agent_events
from bench.client import Connection, Exchange, Loop
from bench.stats import percentiles, write_result
from bench.textgen import PromptSource, short_prompt

_PROMPT_TOKENS = re.compile(rb'"(?:prompt_tokens|count)":\s*(\d+)')
_COMPLETION_TOKENS = re.compile(rb'"completion_tokens":\s*(\d+)')
_KEEP_BODY = 1 << 16
#: A request with no answer (a stream with no token) for this long counts as an error.
STALL_S = 20.0


def _request(host: str, port: int, path: str, body: bytes, close: bool = False) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: */*\r\nContent-Length: {len(body)}\r\n"
            f"{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n").encode() + body


class _Load:
    """Shared state of one run: the loop, the window, the records."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.loop = Loop()
        self.host, self.port = cfg["host"], cfg["port"]
        self.t0, self.t1 = cfg["t0"], cfg["t1"]
        self.errors: dict[str, int] = {}
        self.errors_in_window = 0
        self.sent = 0
        self.inflight: set[Any] = set()  # the requests sent and not yet answered

    def start(self, conn: Connection | None, now: float) -> None:
        """Send a client's next request (on ``conn``, or a new connection)."""
        raise NotImplementedError

    def error(self, reason: str, t: float) -> None:
        self.errors[reason] = self.errors.get(reason, 0) + 1
        if self.t0 <= t <= self.t1:
            self.errors_in_window += 1

    def _stalled(self, sent_times: Any) -> int:
        """Requests still unanswered (stream: without a token) after ``STALL_S`` at the window's
        end: a hung server must not look like an idle one with zero errors."""
        n = sum(1 for t in sent_times if self.t1 - t > STALL_S)
        if n:
            self.errors[f"no answer after {STALL_S:g} s"] = n
        return n

    def failed(self, ex: Any, reason: str, t: float) -> None:
        """A request that failed: counted, and its client starts a new one 10 ms later (on a
        new connection)."""
        self.inflight.discard(ex)
        self.error(reason, t)
        self.loop.call_at(t + 0.01, lambda now: self.start(None, now))

    def run_clients(self, ramp_s: float = 0.0) -> None:
        """Start the configured number of clients over ``ramp_s`` and run until the window ends."""
        n = self.cfg["concurrency"]
        for i in range(n):
            self.loop.call_at(self.cfg["t_begin"] + ramp_s * i / n, lambda t: self.start(None, t))
        self.loop.run(self.t1 + 0.05)
        self.loop.close()

    def usable(self, conn: Connection | None, now: float) -> Connection | None:
        """The connection a client's next request goes on: None once the window has ended
        (the connection is closed), or while a new one cannot be made (retried in 50 ms)."""
        if now >= self.t1:
            if conn is not None:
                conn.close()
            return None
        if conn is None or conn.closed:
            conn = self.connect()
            if conn is None:
                self.loop.call_at(now + 0.05, lambda t: self.start(None, t))
        return conn

    def connect(self) -> Connection | None:
        try:
            return Connection(self.loop, self.host, self.port)
        except OSError as exc:
            self.error(f"connect: {exc.strerror or exc}", monotonic())
            return None


class _RunExchange(Exchange):
    """An exchange that reports its end to the run that sent it (``self.run``)."""

    __slots__ = ()

    def on_done(self, t: float) -> None:
        self.run.finished(self, t)

    def on_error(self, reason: str, t: float) -> None:
        self.run.failed(self, reason, t)


# -- long prompts ---------------------------------------------------------------------------------

class _LongExchange(_RunExchange):
    __slots__ = ("conn", "head", "run", "size", "status", "t_send", "tail")

    def __init__(self, run: _LongRun, conn: Connection, t_send: float) -> None:
        self.run, self.conn, self.t_send = run, conn, t_send
        self.status = 0
        self.head = b""
        self.tail = b""
        self.size = 0

    def on_head(self, status: int, t: float) -> None:
        self.status = status

    def on_body(self, data: bytes, t: float) -> None:
        # Keep small bodies whole, big ones (/tokenize: ~500 kB of ids) only at both ends.
        self.size += len(data)
        if len(self.head) < _KEEP_BODY:
            self.head += data
        else:
            self.tail = (self.tail + data[-512:])[-512:]


class _LongRun(_Load):
    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        self.prompts = PromptSource(cfg["seed"])
        self.index = cfg.get("first_index", 0)
        self.records: list[tuple[float, float, int, int]] = []  # (t_done, latency, status, tokens)
        self.inflight: set[_LongExchange] = set()

    def body(self) -> bytes:
        cfg = self.cfg
        self.index += 1
        prompt = self.prompts.json_bytes(self.index, cfg["chars"])
        model = json.dumps(cfg["model"]).encode()
        if cfg["endpoint"] == "tokenize":
            return b'{"model":' + model + b',"prompt":' + prompt + b"}"
        return (b'{"model":' + model + b',"prompt":' + prompt + b',"max_tokens":'
                + str(cfg["max_tokens"]).encode() + b',"temperature":0,"ignore_eos":true}')

    def start(self, conn: Connection | None, now: float) -> None:
        conn = self.usable(conn, now)
        if conn is None:
            return
        path = "/tokenize" if self.cfg["endpoint"] == "tokenize" else "/v1/completions"
        raw = _request(self.host, self.port, path, self.body(), close=True)
        self.sent += 1
        ex = _LongExchange(self, conn, monotonic())
        self.inflight.add(ex)
        conn.send(raw, ex)

    def finished(self, ex: _LongExchange, t: float) -> None:
        self.inflight.discard(ex)
        if ex.status != 200:
            self.error(f"HTTP {ex.status}: {ex.head[:200].decode(errors='replace')}", t)
        elif self.t0 <= t <= self.t1:
            found = _PROMPT_TOKENS.search(ex.head + ex.tail)
            self.records.append((t, t - ex.t_send, ex.status, int(found.group(1)) if found else 0))
        ex.conn.close()
        self.start(None, t)

    def run(self) -> dict[str, Any]:
        self.run_clients()
        window = self.t1 - self.t0
        ok = self.records
        stalled = self._stalled(ex.t_send for ex in self.inflight)
        lat = sorted(r[1] * 1000 for r in ok)
        tokens = sum(r[3] for r in ok)
        return {
            "mode": "long", "window_s": window, "sent": self.sent,
            "completed": len(ok), "req_per_s": len(ok) / window,
            "prompt_tokens_per_s": tokens / window,
            "prompt_tokens_mean": tokens / len(ok) if ok else 0,
            "latency_ms": percentiles(lat), "stalled": stalled,
            "errors": self.errors_in_window + stalled, "error_kinds": self.errors,
        }


# -- short streams --------------------------------------------------------------------------------

class _StreamExchange(_RunExchange):
    __slots__ = (
        "api",
        "assumed",
        "carry",
        "conn",
        "err_body",
        "events",
        "first",
        "last",
        "failed_event",
        "first_tokens",
        "max_tokens",
        "run",
        "status",
        "t_send",
        "tokens",
    )

    def __init__(self, run: _StreamRun, conn: Connection, t_send: float, max_tokens: int,
                 api: StreamApi | None = None) -> None:
        self.run, self.conn, self.t_send = run, conn, t_send
        self.max_tokens = max_tokens
        # Responses / Messages: text deltas counted, reconciled with the final usage
        self.api = api if api is not None and api.delta_event is not None else None
        self.assumed = 0  # of self.tokens, those no usage figure confirmed yet
        self.failed_event = False
        self.status = 0
        self.carry = b""
        self.first = 0.0
        self.last = 0.0
        self.events = 0
        self.tokens = 0  # counted (continuous usage), or assumed one per event where missing
        self.first_tokens = 0
        self.err_body = b""

    def on_head(self, status: int, t: float) -> None:
        self.status = status

    def on_body(self, data: bytes, t: float) -> None:
        if self.status != 200:
            self.err_body = (self.err_body + data)[:300]
            return
        buf = self.carry + data if self.carry else data
        n = buf.count(b"\n\n")
        if not n:
            self.carry = buf
            return
        end = buf.rfind(b"\n\n")
        done = buf[:end]
        self.carry = buf[end + 2:]
        if self.api is not None:
            account_agent_events(self, done, t)
            return
        # Token events are the ones with choices; the usage chunk and [DONE] are not.
        content = n - done.count(b'"choices":[]') - done.count(b"data: [DONE]")
        total = None
        if b'"completion_tokens"' in done:
            total = int(_COMPLETION_TOKENS.findall(done)[-1])
        run = self.run
        if content <= 0:
            if total is not None:
                self.tokens = total
            return
        # Tokens in these events, counted: with continuous usage stats every chunk carries the
        # stream's cumulative completion_tokens, so a chunk that merged several engine steps
        # counts as all its tokens. A frontend that sends none gets one token per event, and
        # the run reports the share it had to assume.
        if total is not None:
            # A chunk whose cumulative count did not move carries no token (chat's role chunk).
            count = total - self.tokens
            self.tokens = total
            if count <= 0:
                return
        else:
            count = content
            self.tokens += content
            run.assumed_tokens += content
        if not self.events:
            self.first = t
            self.first_tokens = count
            # By arrival inside the window: counting by send time would drop the slow ones
            # still waiting at the window's end.
            if run.t0 <= t <= run.t1:
                run.ttft.append((t - self.t_send) * 1000)
        elif run.t0 <= t <= run.t1:
            # Per token: the first token of this read waited since the last one; the others
            # arrived with it.
            gaps = run.gaps
            gaps.append((t - self.last) * 1000)
            for _ in range(count - 1):
                gaps.append(0.0)
        if run.t0 <= t <= run.t1:
            run.events_in_window += content
            run.tokens_in_window += count
        self.events += content
        run.seen_tokens += count
        self.last = t


class _StreamRun(_Load):
    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        self.rng = random.Random(cfg["seed"])
        self.index = 0
        self.ttft: list[float] = []
        self.gaps = array("f")
        self.events_in_window = 0
        self.tokens_in_window = 0
        self.seen_tokens = 0  # every token event's tokens, and how many of them were assumed
        self.assumed_tokens = 0
        self.stream_itl: list[float] = []  # per finished stream: mean gap between its tokens
        self.tails: list[float] = []  # per finished stream: last token event -> end of response
        self.inflight: set[_StreamExchange] = set()
        self.tokens_done = 0
        self.events_done = 0
        self.completed = 0
        self.short = 0  # streams that ended before their max_tokens (EOS, a stop)

    def start(self, conn: Connection | None, now: float) -> None:
        conn = self.usable(conn, now)
        if conn is None:
            return
        cfg = self.cfg
        self.index += 1
        max_tokens = self.rng.randint(cfg["min_tokens"], cfg["max_tokens"])
        api = BY_NAME.get(cfg.get("api", ""))
        if api is not None:  # the agent scenarios (bench.agent_streams)
            self._send(conn, api.path, api.body(cfg["model"], short_prompt(
                self.index, cfg["seed"]), max_tokens), max_tokens, api)
            return
        request = {
            "model": cfg["model"], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
        if cfg.get("tools"):
            # The simulator answers with the scripted tool calls (repeated up to max_tokens,
            # its --script-tokens), which the server's tool parser turns into delta.tool_calls.
            request.update(messages=[{"role": "user", "content": short_prompt(
                self.index, cfg["seed"])}], tools=cfg["tools"])
            path = "/v1/chat/completions"
        else:
            request["prompt"] = short_prompt(self.index, cfg["seed"])
            path = "/v1/completions"
        self._send(conn, path, json.dumps(request).encode(), max_tokens)

    def _send(self, conn: Connection, path: str, body: bytes, max_tokens: int,
              api: StreamApi | None = None) -> None:
        self.sent += 1
        ex = _StreamExchange(self, conn, monotonic(), max_tokens, api)
        self.inflight.add(ex)
        conn.send(_request(self.host, self.port, path, body), ex)

    def finished(self, ex: _StreamExchange, t: float) -> None:
        self.inflight.discard(ex)
        if ex.status != 200:
            self.error(f"HTTP {ex.status}: {ex.err_body.decode(errors='replace')}", t)
        elif ex.failed_event:
            self.error("a failure event in the stream", t)
        elif self.t0 <= t <= self.t1:
            self.completed += 1
            self.short += ex.tokens < ex.max_tokens
            self.tokens_done += ex.tokens
            self.events_done += ex.events
            if ex.tokens > ex.first_tokens and ex.events > 1:
                self.stream_itl.append((ex.last - ex.first) * 1000
                                       / (ex.tokens - ex.first_tokens))
            if ex.events:
                self.tails.append((t - ex.last) * 1000)
        self.start(ex.conn, t)

    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        n = cfg["concurrency"]
        self.run_clients(cfg["ramp_s"])
        window = self.t1 - self.t0
        per_event = self.tokens_done / self.events_done if self.events_done else 1.0
        counted = 1.0 - self.assumed_tokens / self.seen_tokens if self.seen_tokens else 0.0
        stalled = self._stalled(ex.t_send for ex in self.inflight if not ex.events)
        return {
            "mode": "stream", "window_s": window, "sent": self.sent,
            "completed": self.completed, "streams": n, "ended_before_limit": self.short,
            "tokens_per_event": per_event,
            "tokens_counted_share": counted,
            "tokens_per_s": self.tokens_in_window / window,
            "ttft_ms": percentiles(sorted(self.ttft)),
            "itl_gap_ms": percentiles(sorted(self.gaps)),
            "itl_stream_mean_ms": percentiles(sorted(self.stream_itl)),
            "end_after_last_token_ms": percentiles(sorted(self.tails)), "stalled": stalled,
            "errors": self.errors_in_window + stalled, "error_kinds": self.errors,
        }


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        cfg = json.load(f)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 1,000+ sockets
    run = _LongRun(cfg) if cfg["mode"] == "long" else _StreamRun(cfg)
    write_result(argv[1], run.run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
