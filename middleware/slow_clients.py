"""Responses whose client stopped reading: bounded, then aborted.

What a response holds while its client does not read: gunicorn writes each body chunk with the
gevent socket's ``sendall``, which keeps only that chunk and blocks this response's greenlet once
the kernel's send buffer is full. That buffer autotunes up to ``net.ipv4.tcp_wmem``'s maximum
(4 MiB by default) and would absorb minutes of a token stream; a stream's connection gets a fixed
``STREAM_SNDBUF`` instead (``bound_send_buffer``). Nothing is rendered meanwhile: the body renders when gunicorn asks for the
next chunk. What the engine keeps producing queues in the request's ``RequestStream``, where
runs of plain outputs are merged into one (a few dozen bytes per token). So a non-reading client
costs at most one chunk (``MAX_PIECE`` bytes) plus what the engine produces for it until the
timeout: ``WriteWatch`` shuts the connection of a response whose write has been blocked for
``GREENFRONT_CLIENT_STALL_TIMEOUT`` seconds; the blocked ``sendall`` then fails with EPIPE,
gunicorn closes the response, and closing it aborts the engine requests. A stream on the direct
write (``offer_direct``) is bounded the same way: the hub's pass sends only what the socket
takes at once, and the rest goes out from the response's greenlet with a watched ``sendall``.

Runs on: the HTTP hub (the sweeper is one greenlet per worker; every method runs there).
"""
from __future__ import annotations

import itertools
import logging
import socket
import time
from typing import Any, Iterable, Iterator

import gevent
import gevent.socket
from gevent import monkey

log = logging.getLogger("greenfront.slow_clients")

#: The send buffer of a streamed response's connection (Linux doubles it for bookkeeping):
#: 128 KiB carries over 1 MB/s at 100 ms of round trip, far more than a token stream needs.
STREAM_SNDBUF = 128 * 1024

#: Bodies are handed to gunicorn in pieces of at most this size, so that the timeout measures
#: a client that reads nothing, not a big body that a slow link needs minutes for.
MAX_PIECE = 64 * 1024

#: The stdlib socket class, for calls on a gevent socket's descriptor that must not go through
#: gevent. NOTE: gevent's own shutdown() wakes the blocked sendall with EBADF ("closed in another
#: greenlet"), which gunicorn logs as a socket error with a traceback; the stdlib socket's
#: shutdown leaves the wait to the kernel, and the write fails with EPIPE, which gunicorn ignores.
#: ``middleware/offload.py`` peeks with it (gevent's recv would wait for readiness).
RealSocket = monkey.get_original("socket", "socket")


class WriteWatch:
    """The responses whose last write has not completed yet, and a sweeper that ends those
    blocked for longer than ``timeout`` seconds (0: never)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._blocked: dict[int, tuple[float, socket.socket]] = {}
        self._keys = itertools.count()
        self._sweeper: gevent.Greenlet | None = None

    def watched(self, chunks: Iterable[bytes], sock: socket.socket | None) -> Iterator[bytes]:
        """``chunks`` in pieces of at most ``MAX_PIECE`` bytes, each watched while gunicorn
        writes it (the time between a yield and the next resumption)."""
        if sock is None or not self.timeout:
            yield from chunks
            return
        if self._sweeper is None:
            self._sweeper = gevent.spawn(self._sweep)
        key = next(self._keys)
        blocked = self._blocked
        try:
            for chunk in chunks:
                for piece in _pieces(chunk):
                    blocked[key] = (time.monotonic(), sock)
                    yield piece
                    blocked.pop(key, None)
        finally:
            blocked.pop(key, None)

    def offer_direct(self, body: Any, sock: socket.socket | None, environ: dict) -> None:
        """Let a streamed body write its chunks straight to the client socket (``write_direct``)
        when gunicorn would frame them as HTTP/1.1 chunks on a plain gevent socket: without
        blocking from the hub, and what a full socket does not take with a blocking ``sendall``
        watched like gunicorn's own writes."""
        write_direct = getattr(body, "write_direct", None)
        if (write_direct is None or type(sock) is not gevent.socket.socket
                or environ.get("SERVER_PROTOCOL") != "HTTP/1.1"):
            return
        raw = sock._sock  # the kernel socket under gevent's, non-blocking

        def send_now(data: bytes) -> int:
            try:
                return raw.send(data)
            except BlockingIOError:
                return 0

        def send_rest(data: bytes) -> None:
            for piece in self.watched((data,), sock):  # watched while it is being sent
                sock.sendall(piece)
        write_direct(send_now, send_rest)

    def _sweep(self) -> None:
        tick = min(1.0, self.timeout / 4)
        while True:
            gevent.sleep(tick)
            now = time.monotonic()
            late = [key for key, (since, _) in self._blocked.items()
                    if now - since >= self.timeout]
            for key in late:
                _, sock = self._blocked.pop(key)
                _abort_connection(sock, self.timeout)


def bound_send_buffer(sock: socket.socket | None) -> None:
    """Fix the kernel send buffer of a stream's connection at ``STREAM_SNDBUF`` (no autotuning
    up to megabytes). It stays so for later requests on a kept-alive connection."""
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, STREAM_SNDBUF)
        except OSError:
            pass  # not a TCP socket (a test double, a closed connection): nothing to bound


def _pieces(chunk: bytes) -> Iterator[bytes]:
    if len(chunk) <= MAX_PIECE:
        yield chunk
        return
    for start in range(0, len(chunk), MAX_PIECE):
        yield chunk[start:start + MAX_PIECE]


def _abort_connection(sock: socket.socket, timeout: float) -> None:
    try:
        peer = sock.getpeername()
    except OSError:
        peer = "?"
    log.warning("client %s read nothing for %g s: its response is aborted", peer, timeout)
    try:
        raw = RealSocket(fileno=sock.fileno())
    except OSError:
        return  # already closed
    try:
        raw.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        raw.detach()  # the fd stays gunicorn's to close
