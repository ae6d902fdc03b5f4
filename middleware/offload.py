"""The offload driver: runs the heavy API paths' Falcon calls in the request pool.

For ``OFFLOADED_PATHS`` the body is read here, in the HTTP hub (``wsgi.input`` belongs to it),
then the whole Falcon call (parse, validate, render the chat template, tokenize, submit to the
engine) runs in a native pool thread. Back in the hub: a non-streamed generation is awaited
(``DeferredBody.resolve``) so it gets a status and a Content-Length; a stream is returned for
gunicorn to iterate here. A client that disconnects cancels its work and aborts its engine
requests (``Cancellation``). Light paths (/health, /v1/models, …) never leave the hub.

``GREENFRONT_OFFLOAD=0`` runs the same path inline in the hub (the benchmark's baseline).

Runs on: the HTTP hub; the Falcon call on a pool thread.
"""
from __future__ import annotations

import io
import logging
import socket
from typing import Any, Callable, Iterable, Iterator

import gevent

from base.errors import ApiError, PayloadTooLarge, ServerError
from middleware.errors import wsgi_error
from middleware.slow_clients import RealSocket, WriteWatch, bound_send_buffer
from runtime.cancellation import CANCEL_KEY, Cancellation
from runtime.request_pool import LIGHT_BODY_BYTES, RequestPool, Skipped
from streaming.error_response import http_parts

log = logging.getLogger("greenfront.offload")

#: The paths whose work is CPU-heavy (tokenization, templates). Everything else stays in the hub.
OFFLOADED_PATHS = frozenset({
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/completions",
    "/tokenize",
    "/detokenize",
    "/inference/v1/generate",
    "/v1/responses",
    # Pooling routes (docs/pooling.md): batches of inputs tokenized in the pool.
    "/v1/embeddings", "/pooling", "/classify", "/score", "/v1/score", "/rerank", "/v1/rerank",
    "/v2/rerank", "/v2/embed",
})

_READ_CHUNK = 1 << 20


def should_offload(environ: dict) -> bool:
    return environ.get("REQUEST_METHOD") == "POST" and environ.get("PATH_INFO") in OFFLOADED_PATHS


class DisconnectWatch:
    """Cancels ``cancel`` when the client closes its connection while we work on its request.

    A libev io watcher whose callback runs in the hub: the first time the connection is
    readable, a peek tells a close (or a reset) from a pipelined request; either way the watch
    ends there. ``stop`` ends it sooner (the response is over).

    PERF: this was a greenlet per request blocked in ``wait_read`` and killed at the end (a
    spawn, three switches and the kill's callback): 7.4% of the HTTP hub's GIL samples under
    300 short streamed requests/s (bench/RESULTS.md §6.2.1). Start and stop, hub CPU: 25.1 µs
    as that greenlet, 1.4 µs as this watcher (20k of each, one idle socket pair).
    """

    __slots__ = ("_io", "_cancel")

    def __init__(self, sock: socket.socket, cancel: Cancellation) -> None:
        self._cancel = cancel
        self._io: Any = None
        try:
            io = gevent.get_hub().loop.io(sock.fileno(), 1)  # 1: EV_READ
        except (OSError, ValueError):  # no connection left to watch
            cancel.cancel()
            return
        io.start(self._readable)
        self._io = io

    def _readable(self) -> None:
        """HTTP hub (the watcher's callback)."""
        io = self._io
        if io is None:
            return
        closed = _peek_closed(io.fd)
        if closed is None:  # woken without data after all: keep watching
            return
        self.stop()
        if closed:
            self._cancel.cancel()
        # Readable with data (a pipelined request): nothing more to learn here.

    def stop(self) -> None:
        io, self._io = self._io, None
        if io is not None:
            io.stop()
            io.close()


def _peek_closed(fd: int) -> bool | None:
    """Whether the peer of ``fd`` has closed (or reset) it; None when nothing can be read yet.
    Never blocks: the hub runs it (gevent's socket would wait for readiness)."""
    raw = RealSocket(fileno=fd)
    try:
        return raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return None
    except OSError:
        return True
    finally:
        raw.detach()  # the fd stays gunicorn's


def _client_gone(start_response: Callable) -> list[bytes]:
    # gunicorn still writes a status line when the body ends; the client is gone, so that write
    # fails with EPIPE/ECONNRESET, which gunicorn treats as a closed connection.
    start_response("499 Client Closed Request", [("Content-Length", "0")])
    return []


def _nothing() -> None:
    pass


class _Captured:
    """start_response as seen by the Falcon call: recorded, replayed later in the hub."""

    __slots__ = ("status", "headers")

    def __init__(self) -> None:
        self.status = "500 Internal Server Error"
        self.headers: list[tuple[str, str]] = []

    def __call__(self, status: str, headers: list, exc_info: Any = None) -> None:
        self.status, self.headers = status, list(headers)


def _started_stream(body: Iterable[bytes], start_response: Callable,
                    captured: _Captured) -> Iterator[bytes]:
    """The status line waits for the body's first chunk (gunicorn writes the headers with the
    first chunk anyway): a stream that fails before it (``error_before_start``) is answered
    with the error's own status and envelope, as a non-streamed request is."""
    chunks = iter(body)
    first = next(chunks, None)
    early = getattr(body, "error_before_start", None)
    if early is not None:
        status, headers, payload = http_parts(early)
        start_response(status, headers)
        yield payload
        return
    start_response(captured.status, captured.headers)
    if first is not None:
        yield first
    yield from chunks


class Closing:
    """The response iterable handed to gunicorn, with a hook run when it is closed."""

    __slots__ = ("_iterable", "_on_close", "_closing")

    def __init__(self, iterable: Iterable[bytes], on_close: Callable[[], None],
                 closing: Any = None) -> None:
        self._iterable = iterable
        self._on_close = on_close
        self._closing = closing if closing is not None else iterable

    def __iter__(self):
        return iter(self._iterable)

    def close(self) -> None:
        parts = (self._iterable,) if self._closing is self._iterable else (
            self._iterable, self._closing)
        try:
            for part in parts:  # each closed once
                close = getattr(part, "close", None)
                if close is not None:
                    close()
        finally:
            self._on_close()


class OffloadMiddleware:
    """WSGI wrapper around the Falcon app.

    Args:
        app: the Falcon WSGI app.
        pool: returns the request pool (made lazily, after fork).
        enabled: False runs offloaded paths inline (GREENFRONT_OFFLOAD=0).
        max_body_bytes: larger bodies get 413.
        client_stall_timeout: a response whose client reads nothing for this long is aborted
            (``middleware.slow_clients``; 0: never).
    """

    def __init__(self, app: Callable, *, pool: Callable[[], RequestPool], enabled: bool,
                 max_body_bytes: int, before: Callable[[], None] | None = None,
                 client_stall_timeout: float = 0.0) -> None:
        self._watch = WriteWatch(client_stall_timeout)
        self._app = app
        self._pool = pool
        self._enabled = enabled
        self._max_body = max_body_bytes
        self._before = before

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if self._before is not None:
            self._before()
        if not should_offload(environ):
            return self._app(environ, start_response)
        try:
            body = self._read_body(environ)
        except ApiError as error:
            return wsgi_error(start_response, error)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        cancel = Cancellation()
        environ[CANCEL_KEY] = cancel
        sock = environ.get("gunicorn.socket")
        watch = DisconnectWatch(sock, cancel) if sock is not None else None
        stop_watching = watch.stop if watch is not None else _nothing

        try:
            return self._respond(environ, start_response, cancel, stop_watching,
                                 len(body) <= LIGHT_BODY_BYTES)
        except BaseException:
            stop_watching()
            raise

    def _respond(self, environ: dict, start_response: Callable, cancel: Cancellation,
                 stop_watching: Callable[[], None], light: bool) -> Iterable[bytes]:
        captured = _Captured()
        try:
            if self._enabled:
                result = self._pool().apply(
                    self._app, (environ, captured), cancelled=lambda: cancel.cancelled,
                    light=light)
            else:
                result = self._app(environ, captured)
        except Skipped:  # the client left while its request waited for a thread
            stop_watching()
            return _client_gone(start_response)
        except Exception as exc:  # Falcon's handlers catch nearly everything; this is the rest
            log.exception("request work failed outside Falcon")
            stop_watching()
            return wsgi_error(start_response, ServerError(f"Internal server error: {exc}"))
        resolve = getattr(result, "resolve", None)
        if resolve is not None:
            # A non-streamed generation: wait for it here, in the hub, then answer with a status
            # and a Content-Length like any JSON response.
            try:
                status, headers, payload = resolve(cancel)
            finally:
                stop_watching()
            if cancel.cancelled:
                return _client_gone(start_response)
            start_response(status, headers)
            return self._watch.watched([payload], environ.get("gunicorn.socket"))
        if cancel.cancelled:
            close = getattr(result, "close", None)
            if close is not None:
                close()
            stop_watching()
            return _client_gone(start_response)
        sock = environ.get("gunicorn.socket")
        bound_send_buffer(sock)
        self._watch.offer_direct(result, sock, environ)
        body = _started_stream(result, start_response, captured)
        return Closing(self._watch.watched(body, sock),
                       stop_watching, closing=result)

    def _read_body(self, environ: dict) -> bytes:
        stream = environ["wsgi.input"]
        length = environ.get("CONTENT_LENGTH")
        if length:
            try:
                size = int(length)
            except ValueError:
                size = -1
            if size > self._max_body:
                raise PayloadTooLarge(f"Request body of {size} bytes exceeds the limit of "
                                      f"{self._max_body} bytes.")
            if size >= 0:
                return stream.read(size)
        chunks, total = [], 0
        while True:
            chunk = stream.read(_READ_CHUNK)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > self._max_body:
                raise PayloadTooLarge(f"Request body exceeds the limit of {self._max_body} bytes.")
            chunks.append(chunk)
