"""The direct write (streaming/body.py ``StreamingBody.write_direct``, offered by
middleware/slow_clients.py): once the first chunk went out through the server, the hub's pass
after each drain writes a stream's chunks straight to its socket, in gunicorn's chunked framing.
Over a real socket pair, the client's bytes must be exactly the greenlet path's, whatever the
socket, the stop strings, the failures and the cancellations do."""
from __future__ import annotations

import json
import re
import socket

import gevent
import gevent.socket

from base.errors import ServerError
from engine.protocol import EngineCoreOutput
from middleware.slow_clients import WriteWatch
from resources.chat.convert import prepare_chat
from resources.chat.render import ChatStreamRenderer, render_chat_response
from resources.completions.convert import prepare_completion
from resources.completions.render import CompletionStreamRenderer, render_completion_response
from tests.support.bodies import BodyRun
from tests.unit.resources.conftest import FRANCE, SAY_HI

HTTP11 = {"SERVER_PROTOCOL": "HTTP/1.1"}


class DirectRun(BodyRun):
    """A ``BodyRun`` whose body is offered the direct write on one end of a socket pair; the
    body's greenlet writes what it yields to the same socket as gunicorn does."""

    def __init__(self, *args, sndbuf: int = 0, timeout: float = 0, **kwargs) -> None:
        self.server, self.peer = gevent.socket.socketpair()
        if sndbuf:
            self.server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        super().__init__(*args, **kwargs)
        WriteWatch(timeout).offer_direct(self.http_body, self.server, HTTP11)

    def _read(self) -> None:
        try:
            for chunk in self.http_body:
                self._chunks.append(chunk)
                if chunk:
                    self.server.sendall(b"%X\r\n%s\r\n" % (len(chunk), chunk))
            self.server.sendall(b"0\r\n\r\n")
        finally:
            self.http_body.close()

    def wire(self) -> bytes:
        """What the client received, de-chunked (the response must have ended)."""
        received: list[bytes] = []

        def read() -> None:
            while True:
                data = self.peer.recv(1 << 16)
                if not data:
                    break
                received.append(data)
        reader = gevent.spawn(read)
        self.response()
        self.server.shutdown(socket.SHUT_WR)
        reader.join(timeout=5)
        assert reader.dead
        return dechunk(b"".join(received))


def dechunk(raw: bytes) -> bytes:
    body, at = b"", 0
    while True:
        end = raw.index(b"\r\n", at)
        size = int(raw[at:end], 16)
        if size == 0:
            assert raw[end:] == b"\r\n\r\n", "bytes after the last chunk"
            return body
        body += raw[end + 2:end + 2 + size]
        assert raw[end + 2 + size:end + 4 + size] == b"\r\n"
        at = end + 4 + size


def same(a: bytes, b: bytes) -> bool:
    def norm(x: bytes) -> bytes:
        return re.sub(rb'"(id|created)":("[^"]*"|\d+)', b"", x)
    return norm(a) == norm(b)


def text_and_ends(body: bytes) -> tuple[str, list]:
    """A completion stream's text and each event's finish reason (chunking aside)."""
    events = [json.loads(line[6:]) for line in body.decode().split("\n\n")
              if line.startswith("data: {")]
    return ("".join(e["choices"][0]["text"] for e in events),
            [e["choices"][0]["finish_reason"] for e in events][-1:])


def completion_runs(ctx, body: dict, **kw) -> tuple[BodyRun, DirectRun]:
    full = {"model": "tiny", "prompt": "The capital of France is", "temperature": 0,
            "stream": True, **body}
    return (BodyRun(prepare_completion(full, ctx), ctx, CompletionStreamRenderer,
                    render_completion_response),
            DirectRun(prepare_completion(full, ctx), ctx, CompletionStreamRenderer,
                      render_completion_response, **kw))


def test_the_direct_write_sends_the_greenlet_paths_bytes(ctx):
    plain, direct = completion_runs(
        ctx, {"max_tokens": 8, "stream_options": {"include_usage": True,
                                                  "continuous_usage_stats": True}})
    for run in (plain, direct):
        run.tokens(FRANCE)
    assert same(direct.wire(), plain.response())
    # The first chunk and the final ones went through the server, the rest straight out.
    assert len(direct.chunks) == 2 and len(plain.chunks) == 8


def test_chat_with_a_stop_string_ends_through_the_greenlet(ctx):
    full = {"model": "tiny", "messages": [{"role": "user", "content": "Say hi"}],
            "max_tokens": 8, "stream": True, "stop": ["inom"]}
    plain = BodyRun(prepare_chat(full, ctx), ctx, ChatStreamRenderer, render_chat_response)
    direct = DirectRun(prepare_chat(full, ctx), ctx, ChatStreamRenderer, render_chat_response)
    for run in (plain, direct):
        run.tokens(SAY_HI, finish=None)
    assert same(direct.wire(), plain.response())
    assert direct.client.aborted == [direct.streams[0].request_id]


def test_a_full_socket_hands_the_rest_to_the_greenlet(ctx):
    plain, direct = completion_runs(ctx, {"max_tokens": 400, "ignore_eos": True},
                                    sndbuf=4096)
    tokens = (FRANCE * 50)[:400]
    for run in (plain, direct):
        run.tokens(tokens[:1], finish=None)
    # The client reads nothing while 399 steps arrive: the socket fills, the body's greenlet
    # blocks on the rest while later steps queue and merge (fewer, larger events); then the
    # client reads.
    for token in tokens[1:-1]:
        direct.step([token])
        plain.step([token])
    plain.step(tokens[-1:], 1)
    direct.step(tokens[-1:], 1)
    wire = direct.wire()
    assert text_and_ends(wire) == text_and_ends(plain.response())
    assert wire.endswith(b"data: [DONE]\n\n") and len(direct.chunks) == 2


def test_an_engine_failure_while_parked_is_an_error_event(ctx):
    plain, direct = completion_runs(ctx, {"max_tokens": 8})
    for run in (plain, direct):
        run.tokens(FRANCE[:3], finish=None)
        run.streams[0].fail(ServerError("engine core died"))
        gevent.idle()
    wire = direct.wire()
    assert same(wire, plain.response())
    assert wire.endswith(b'"code": 500}}\n\ndata: [DONE]\n\n')


def test_a_cancelled_stream_stops_while_parked(ctx):
    _, direct = completion_runs(ctx, {"max_tokens": 8})
    direct.tokens(FRANCE[:3], finish=None)
    direct.cancel.cancel()
    gevent.idle()
    assert direct.client.aborted == [direct.streams[0].request_id]
    wire = direct.wire()
    assert wire.count(b"data: ") == 3 and b"[DONE]" not in wire


def test_a_broken_connection_is_raised_in_the_greenlet(ctx):
    _, direct = completion_runs(ctx, {"max_tokens": 8})
    direct.tokens(FRANCE[:2], finish=None)
    direct.peer.close()
    direct.step([FRANCE[2]])
    direct._reader.join(timeout=5)
    assert isinstance(direct._reader.exception, OSError)
    assert direct.client.aborted == [direct.streams[0].request_id]


def test_not_offered_beyond_one_plain_choice(ctx):
    for body in ({"n": 2, "temperature": 1}, ):
        _, direct = completion_runs(ctx, {"max_tokens": 8, **body})
        assert direct.http_body._send_now is None
    plain, direct = completion_runs(ctx, {"max_tokens": 8})
    assert direct.http_body._send_now is not None


def test_steps_drained_together_go_out_in_one_write(ctx):
    _, direct = completion_runs(ctx, {"max_tokens": 8})
    direct.step(FRANCE[:1])
    stream = direct.streams[0]
    for token in FRANCE[1:4]:  # three steps handed to the hub before its pass runs
        stream.deliver(EngineCoreOutput(stream.request_id, [token]))
    gevent.idle()
    direct.step(FRANCE[4:5])
    direct.tokens(FRANCE[5:])
    wire = direct.wire()
    # the first chunk, the three steps merged, then one per step (the last from the greenlet)
    assert wire.count(b"data: {") == 6


def test_a_cancellation_with_outputs_that_render_nothing_ends_the_stream(ctx):
    # The client leaves while an output that shows nothing yet is queued: the pass hands back,
    # the greenlet takes that output (no chunk) and must end, not park again with no wake to come.
    _, direct = completion_runs(ctx, {"max_tokens": 8})
    direct.tokens(FRANCE[:2], finish=None)
    stream = direct.streams[0]
    stream.deliver(EngineCoreOutput(stream.request_id, []))
    direct.cancel.cancel()
    direct._reader.join(timeout=5)
    assert direct._reader.dead
    assert direct.client.aborted == [stream.request_id]
