"""A driver for the real response bodies: a prepared request, hand-made engine outputs delivered
step by step into real ``RequestStream``s, and ``streaming.body``'s ``StreamingBody`` (iterated
in its own greenlet, as gunicorn iterates it) or ``DeferredBody`` (resolved as the offload driver
does). What the client would receive comes back as bytes; aborts sent to the engine are recorded.
"""
from __future__ import annotations

from typing import Any, Callable

import gevent

from engine.protocol import EngineCoreOutput
from engine.stream import RequestStream, Waker
from streaming.output import RequestState
from streaming.sse import error_event
from runtime.cancellation import Cancellation
from streaming.body import DeferredBody, StreamingBody
from streaming.submit import Generation


class RecordingClient:
    """The engine client's ``abort`` as a ``Generation`` uses it, recording the ids."""

    def __init__(self) -> None:
        self.aborted: list[str] = []

    def abort(self, request_ids: list[str]) -> None:
        self.aborted.extend(request_ids)


class BodyRun:
    """One generation behind a real body.

    Args:
        prepared: the ``PreparedRequest``.
        ctx: the serving context.
        stream_renderer: the endpoint's stream renderer class, ``(prepared, ctx)``.
        render_response: the endpoint's ``(prepared, state) -> bytes``.
        output_state: ``(prepared, ctx, generation) -> state`` (default ``RequestState``).
    """

    def __init__(self, prepared: Any, ctx: Any, stream_renderer: Callable[..., Any],
                 render_response: Callable[..., bytes],
                 output_state: Callable[..., Any] | None = None) -> None:
        self.prepared = prepared
        self.client = RecordingClient()
        waker = Waker()
        self.streams = [RequestStream(f"req-{i}", 0, waker, self.client.abort)
                        for i in range(len(prepared.choices))]
        self.generation = Generation(self.client, self.streams, waker)
        make_state = output_state or (lambda p, c, g: RequestState(p, c))
        self.state = make_state(prepared, ctx, self.generation)
        self.cancel = Cancellation()
        self._chunks: list[bytes] = []
        self._response: bytes | None = None
        self._reader: gevent.Greenlet | None = None
        if prepared.stream:
            self.http_body: Any = StreamingBody(self.generation, self.state,
                                           stream_renderer(prepared, ctx), self.cancel,
                                           error_event)
            self._reader = gevent.spawn(self._read)
            gevent.idle()
        else:
            self.http_body = DeferredBody(self.generation, self.state,
                                     lambda st: render_response(prepared, st))

    def _read(self) -> None:
        for chunk in self.http_body:
            self._chunks.append(chunk)

    def step(self, tokens: list[int], finish: int | None = None, index: int = 0,
             stop_reason: Any = None, version: str | None = "default", **fields: Any) -> "BodyRun":
        """Deliver one engine step's output for choice ``index``; a streamed body writes it."""
        output = EngineCoreOutput(self.streams[index].request_id, list(tokens),
                                  finish_reason=finish, stop_reason=stop_reason, **fields)
        if not self.streams[index].finished:
            self.streams[index].deliver(output, None, version)
        gevent.idle()
        return self

    def tokens(self, tokens: list[int], finish: int = 1, stop_reason: Any = None,
               index: int = 0, **fields: Any) -> "BodyRun":
        """One step per token; the last carries ``finish`` and ``stop_reason``."""
        for i, token in enumerate(tokens):
            last = i == len(tokens) - 1
            self.step([token], finish if last else None, index,
                      stop_reason if last else None, **fields)
        return self

    def response(self) -> bytes:
        """The bytes the client receives: every SSE chunk written, or the deferred body (the
        outputs reach the output state only now, all at once, as when the body is resolved)."""
        if self._response is None:
            self._response = self._finish()
        return self._response

    def done(self) -> "BodyRun":
        """``response()``, for chaining: then ``state`` has seen every output."""
        self.response()
        return self

    def _finish(self) -> bytes:
        if self._reader is not None:
            self._reader.join(timeout=5)
            assert self._reader.dead, "the stream did not finish: a choice is still running"
            self._reader.get()
            return b"".join(self._chunks)
        status, _headers, body = self.http_body.resolve(self.cancel)
        assert status.startswith("200"), (status, body)
        return body

    @property
    def chunks(self) -> list[bytes]:
        """The writes of a streamed body so far, one per wake-up."""
        return list(self._chunks)
