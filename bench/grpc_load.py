"""The gRPC load generator: ``python -m bench.grpc_load CONFIG.json OUT.json`` (its own process).

Owns the ``grpc-stream`` load: the ``stream`` scenario's shape (N closed-loop streams, opened
over ``ramp_s``, short prompts, ``max_new_tokens`` drawn from [min, max], greedy, ``ignore_eos``)
as ``vllm.Inference/GenerateStream`` calls, and the same result JSON as ``bench.loadgen``'s
``stream`` mode, so the report's stream tables read it unchanged. Tokens are counted from each
message's ``outputs.num_tokens`` (always sent, so ``tokens_counted_share`` is 1); a message is
an "event" (a chunk); the first message, ``prompt_info`` only, carries no token and is not one.

Connection layout: ``connections`` HTTP/2 connections (default ``CONNECTIONS``), the streams
spread over them in contiguous blocks, so that connection k opens at ``ramp_s * k / connections``
(spaced in time: with several gunicorn workers on one listening socket, a connection stays with
whichever worker accepted it, and connections opened in one burst tend to land on one). A real
router opens one connection per backend (SMG's ``connect_channel``: one ``tonic`` channel per
worker URL); one connection would leave all but one of greenfront's workers idle, and greenfront
takes at most 1,000 streams on a connection, so the benchmark uses several (docs/grpc.md §1).

Runs on: its own process, one thread, a ``bench.client.Loop``; pinned by the orchestrator.
"""
from __future__ import annotations

import json
import resource
import sys
from time import monotonic
from typing import Any

from bench.grpc_client import Call, H2Connection, grpc_message, request_headers
from bench.loadgen import _StreamRun
from bench.stats import write_result
from bench.textgen import short_prompt
from rpc.proto import inference_pb2 as pb

PATH = "/vllm.Inference/GenerateStream"
#: HTTP/2 connections of a phase (64 streams each at 1,024 streams).
CONNECTIONS = 16
_parse = pb.GenerateResponse.FromString


class _GrpcStreamCall(Call):
    """One GenerateStream call, with the attributes ``bench.loadgen``'s stream accounting reads
    (``_StreamRun.finished``): ``conn`` is the call's slot, the client it stands for."""

    __slots__ = ("conn", "err_body", "events", "failed_event", "first", "first_tokens", "last",
                 "max_tokens", "run", "status", "t_send", "tokens")

    def __init__(self, run: _GrpcStreamRun, slot: int, t_send: float, max_tokens: int) -> None:
        self.run, self.conn, self.t_send = run, slot, t_send
        self.max_tokens = max_tokens
        self.failed_event = False  # gRPC ends a failed call with a status, never inside a stream
        self.status = 0
        self.first = self.last = 0.0
        self.events = self.tokens = self.first_tokens = 0
        self.err_body = b""

    def on_message(self, payload: bytes, t: float) -> None:
        count = _parse(payload).outputs.num_tokens
        if not count:
            return  # the prompt_info message, or a finish without tokens
        self.tokens += count
        run = self.run
        in_window = run.t0 <= t <= run.t1
        if not self.events:
            self.first = t
            self.first_tokens = count
            if in_window:
                run.ttft.append((t - self.t_send) * 1000)
        elif in_window:
            # As bench.loadgen counts a chunk of k tokens: its gap once, then k - 1 zeros.
            gaps = run.gaps
            gaps.append((t - self.last) * 1000)
            for _ in range(count - 1):
                gaps.append(0.0)
        if in_window:
            run.events_in_window += 1
            run.tokens_in_window += count
        self.events += 1
        run.seen_tokens += count
        self.last = t

    def on_end(self, status: int, message: str, t: float) -> None:
        if status == 0:
            self.status = 200  # what bench.loadgen's accounting takes as a complete answer
            self.run.finished(self, t)
        else:
            self.run.failed(self, f"gRPC status {status}: {message[:200]}", t)

    def on_error(self, reason: str, t: float) -> None:
        self.run.failed(self, reason, t)


class _GrpcStreamRun(_StreamRun):
    """``bench.loadgen``'s stream run with its calls on shared HTTP/2 connections."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        n = cfg["concurrency"]
        self.connections = max(1, min(cfg.get("connections", CONNECTIONS), n))
        self.conns: list[H2Connection | None] = [None] * self.connections
        self.slots = 0
        self.headers = request_headers(f"{self.host}:{self.port}", PATH)

    def _connection(self, slot: int) -> H2Connection | None:
        k = slot * self.connections // self.cfg["concurrency"]
        conn = self.conns[k]
        if conn is None or not conn.usable:
            try:
                conn = self.conns[k] = H2Connection(self.loop, self.host, self.port,
                                                    self.headers)
            except OSError as exc:
                self.error(f"connect: {exc.strerror or exc}", monotonic())
                return None
        return conn

    def start(self, slot: int | None, now: float) -> None:
        if now >= self.t1:
            return
        if slot is None:
            slot = self.slots
            self.slots += 1
        conn = self._connection(slot)
        if conn is None:
            self.loop.call_at(now + 0.05, lambda t: self.start(slot, t))
            return
        cfg = self.cfg
        self.index += 1
        max_tokens = self.rng.randint(cfg["min_tokens"], cfg["max_tokens"])
        request = pb.GenerateRequest(
            model=cfg["model"], text=short_prompt(self.index, cfg["seed"]),
            stopping=pb.StoppingCriteria(max_new_tokens=max_tokens, ignore_eos=True))
        # (temperature omitted: greedy, docs/grpc.md §3)
        self.sent += 1
        call = _GrpcStreamCall(self, slot, monotonic(), max_tokens)
        self.inflight.add(call)
        conn.start(grpc_message(request.SerializeToString()), call)

    def failed(self, ex: _GrpcStreamCall, reason: str, t: float) -> None:
        # A failed call does not lose its slot's connection (unless the connection failed).
        self.inflight.discard(ex)
        self.error(reason, t)
        self.loop.call_at(t + 0.01, lambda now: self.start(ex.conn, now))

    def run(self) -> dict[str, Any]:
        result = super().run()
        result.update(mode="grpc-stream", connections=self.connections)
        return result


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        cfg = json.load(f)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    write_result(argv[1], _GrpcStreamRun(cfg).run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
