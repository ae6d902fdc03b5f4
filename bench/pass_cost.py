"""The direct write's cost per stream and engine step, in one process: no server, no engine.

``python -m bench.pass_cost [--streams 512] [--steps 150] [--model models/tekken-tiny]``

Measures what one engine step costs the HTTP hub per parked stream (issue 26, bench/RESULTS.md
§6.2.2): ``--streams`` streamed completions, each a real ``StreamingBody`` on one end of a unix
socket pair, offered the direct write as ``middleware/slow_clients.py`` offers it; once their
first chunk went out through their greenlet (as gunicorn writes it), each step delivers one
token to every stream (``RequestStream.deliver``) and lets the hub's pass run
(``engine/stream.py``: collect, detokenize, render, frame, one non-blocking ``send``). The
figure is this process's CPU (user + system, the send syscalls included) per stream and step;
the peers are emptied between steps, outside the measured time. It leaves out what a server adds
(the engine-I/O thread, TCP instead of a socket pair, the requests' HTTP path): for those, the
bench's stream phase.

Runs on: its own process, one thread (the gevent hub).
"""
from __future__ import annotations

import argparse
import socket
import time

import gevent
import gevent.socket

import engine.stream as engine_stream
from engine.protocol import EngineCoreOutput
from engine.stream import RequestStream, Waker
from middleware.slow_clients import WriteWatch
from resources.completions.convert import prepare_completion
from resources.completions.render import CompletionStreamRenderer
from runtime.cancellation import Cancellation
from runtime.serving_context import ServingContext
from streaming.body import StreamingBody
from streaming.output import RequestState
from streaming.sse import error_event
from streaming.submit import Generation
from text.chat_template import ChatTemplate
from text.model_dir import ModelFiles
from text.tokenizer import Tokenizer


class _NoEngine:
    """The engine client as a ``Generation`` uses it: aborts go nowhere."""

    def abort(self, request_ids: list[str]) -> None:
        pass


class _Stream:
    """One streamed completion behind a real body, written to a socket pair."""

    def __init__(self, ctx: ServingContext, index: int) -> None:
        prepared = prepare_completion({"model": "tiny", "prompt": "Hello there", "stream": True,
                                       "max_tokens": 1 << 20, "ignore_eos": True}, ctx)
        waker = Waker()
        self.stream = RequestStream(f"req-{index}", 0, waker, _NoEngine().abort)
        generation = Generation(_NoEngine(), [self.stream], waker)  # type: ignore[arg-type]
        self.body = StreamingBody(generation, RequestState(prepared, ctx),
                                  CompletionStreamRenderer(prepared, ctx), Cancellation(),
                                  error_event)
        self.server, self.peer = gevent.socket.socketpair()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
        self.peer.setblocking(False)
        WriteWatch(0).offer_direct(self.body, self.server, {"SERVER_PROTOCOL": "HTTP/1.1"})
        self.writer = gevent.spawn(self._write)

    def _write(self) -> None:
        """What gunicorn does with a body: write each item as an HTTP/1.1 chunk."""
        for chunk in self.body:
            if chunk:
                self.server.sendall(b"%X\r\n%s\r\n" % (len(chunk), chunk))

    def deliver(self, token_id: int) -> None:
        self.stream.deliver(EngineCoreOutput(self.stream.request_id, [token_id]), None, "default")

    def empty_peer(self) -> int:
        """Read what the client got; returns its count of SSE events."""
        events = 0
        try:
            while data := self.peer._sock.recv(1 << 20, socket.MSG_DONTWAIT):
                events += data.count(b"data: ")
        except BlockingIOError:
            pass
        return events


def _settle() -> None:
    """Let the hub run until the pass over every woken stream is over."""
    while engine_stream._READY or engine_stream._PASS.scheduled:
        gevent.sleep(0.0005)  # a wait, not a busy loop: its polls would count as the pass's CPU


def measure(model: str, streams: int, steps: int) -> tuple[float, int]:
    """CPU microseconds per stream and step, and the SSE events the clients received."""
    files = ModelFiles.load(model)
    ctx = ServingContext(
        served_model_names=("tiny",), model_path=files.path,
        tokenizer=Tokenizer.from_files(files),
        chat_template=ChatTemplate(files.chat_template, files.special_tokens),
        max_model_len=1 << 22, generation_defaults=files.generation_defaults(),
        generation_eos_ids=files.generation_eos_token_ids(), system_fingerprint=None,
        special_tokens=dict(files.special_tokens))
    ids = ctx.tokenizer.encode(" the quick brown fox jumps over the lazy dog" * 20, False)
    runs = [_Stream(ctx, i) for i in range(streams)]
    for run in runs:  # the first chunk goes out through the greenlet, which then parks
        run.deliver(ids[0])
    gevent.sleep(0.05)
    events = sum(run.empty_peer() for run in runs)
    cpu = 0.0
    for step in range(1, steps + 1):
        token_id = ids[step % len(ids)]
        started = time.process_time()
        for run in runs:
            run.deliver(token_id)
        _settle()
        cpu += time.process_time() - started
        events += sum(run.empty_peer() for run in runs)
    offered = sum(run.body._send_now is not None for run in runs)
    if offered != streams:
        raise RuntimeError(f"{streams - offered} stream(s) were not offered the direct write")
    return cpu / (streams * steps) * 1e6, events


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pass_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=512)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--model", default="models/tekken-tiny")
    args = parser.parse_args(argv)
    per_step, _ = measure(args.model, args.streams, args.steps)
    print(f"{args.streams} streams x {args.steps} steps: {per_step:.2f} us of CPU per stream "
          f"and step (deliver, the pass, the send)")


if __name__ == "__main__":
    main()
