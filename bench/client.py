"""A minimal non-blocking HTTP/1.1 client on one epoll loop: the load generator's and prober's engine.

Owns ``Loop`` (epoll + a timer heap) and ``Connection`` (one socket: non-blocking connect, partial
sends of large bodies, a response parser for Content-Length, chunked and read-until-close bodies).
Each response is reported to an ``Exchange`` (status, body pieces with their arrival time, done or
error). No gevent, no greenlet switches: one ``recv`` per readiness event and byte-level parsing
keep the client's CPU per streamed token to a few microseconds, so it is not the bottleneck of the
server it measures (the report shows its CPU).

Runs on: the load generator and prober processes (one thread each, the loop's).
"""
from __future__ import annotations

import errno
import heapq
import itertools
import re
import select
import socket
from collections.abc import Callable
from time import monotonic

_IN = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP | select.EPOLLRDHUP
_OUT = select.EPOLLOUT
_RECV = 1 << 18
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)
_CHUNKED = re.compile(rb"\r\ntransfer-encoding:\s*chunked", re.IGNORECASE)
_CLOSE = re.compile(rb"\r\nconnection:\s*close", re.IGNORECASE)

# Response states.
_IDLE, _HEAD, _LENGTH, _CHUNK, _UNTIL_CLOSE = range(5)


class Exchange:
    """Receives one response; subclasses override what they need. Called on the loop."""

    def on_head(self, status: int, t: float) -> None:
        pass

    def on_body(self, data: bytes, t: float) -> None:
        pass

    def on_done(self, t: float) -> None:
        pass

    def on_error(self, reason: str, t: float) -> None:
        pass


class Loop:
    """epoll loop with timers. Not thread-safe (one loop per process)."""

    def __init__(self) -> None:
        self.epoll = select.epoll()
        self.conns: dict[int, Connection] = {}
        self._timers: list[tuple[float, int, Callable[[float], None]]] = []
        self._seq = itertools.count()

    def call_at(self, when: float, fn: Callable[[float], None]) -> None:
        """Run ``fn(now)`` on the loop at monotonic time ``when`` (or as soon after as possible)."""
        heapq.heappush(self._timers, (when, next(self._seq), fn))

    def run(self, until: float) -> None:
        """Serve sockets and timers until monotonic time ``until``."""
        timers, conns, poll = self._timers, self.conns, self.epoll.poll
        while True:
            now = monotonic()
            while timers and timers[0][0] <= now:
                heapq.heappop(timers)[2](now)
                now = monotonic()
            if now >= until:
                return
            wake = min(timers[0][0], until) if timers else until
            for fd, events in poll(max(0.0, wake - now)):
                conn = conns.get(fd)
                if conn is not None:
                    conn.on_events(events)

    def close(self) -> None:
        for conn in list(self.conns.values()):
            conn.close()
        self.epoll.close()


def new_socket() -> socket.socket:
    """A non-blocking TCP socket with Nagle off (every request is one write)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def connect(loop: "Loop", conn: Any, host: str, port: int) -> None:
    """Start ``conn.sock``'s connect and hand ``conn`` to the loop, waiting to write."""
    err = conn.sock.connect_ex((host, port))
    if err not in (0, errno.EINPROGRESS):
        raise OSError(err, f"connect to {host}:{port}: {errno.errorcode.get(err, err)}")
    loop.conns[conn.fd] = conn
    conn._want_out = True
    loop.epoll.register(conn.fd, _IN | _OUT)


class Connection:
    """One HTTP/1.1 connection; at most one request in flight (no pipelining)."""

    __slots__ = (
        "_want_out",
        "buf",
        "closed",
        "connected",
        "exchange",
        "fd",
        "keep_alive",
        "loop",
        "out",
        "remaining",
        "sock",
        "state",
    )

    def __init__(self, loop: Loop, host: str, port: int) -> None:
        self.loop = loop
        self.sock = new_socket()
        self.fd = self.sock.fileno()
        self.connected = False
        self.closed = False
        self.out: memoryview | None = None
        self.exchange: Exchange | None = None
        self.state = _IDLE
        self.buf = b""
        self.remaining = 0
        self.keep_alive = True
        connect(loop, self, host, port)

    @property
    def idle(self) -> bool:
        return self.state == _IDLE and not self.closed

    def send(self, raw: bytes, exchange: Exchange) -> None:
        """Send a complete request (head + body) and report its response to ``exchange``."""
        self.out = memoryview(raw)
        self.exchange = exchange
        self.state = _HEAD
        self.buf = b""
        if self.connected:
            self._flush()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.loop.conns.pop(self.fd, None)
        try:
            self.loop.epoll.unregister(self.fd)
        except (OSError, ValueError):
            pass
        self.sock.close()

    # -- events ------------------------------------------------------------------------------

    def on_events(self, events: int) -> None:
        if events & _OUT:
            if not self.connected:
                err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    self._fail(f"connect: {errno.errorcode.get(err, err)}")
                    return
                self.connected = True
            self._flush()
        if events & _IN and not self.closed:
            self._read()

    def _set_out(self, want: bool) -> None:
        if want != self._want_out and not self.closed:
            self._want_out = want
            self.loop.epoll.modify(self.fd, _IN | _OUT if want else _IN)

    def _flush(self) -> None:
        out = self.out
        if out is not None:
            try:
                sent = self.sock.send(out)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                self._fail(f"send: {exc}")
                return
            out = out[sent:] if sent < len(out) else None
            self.out = out
        self._set_out(out is not None)

    def _read(self) -> None:
        try:
            data = self.sock.recv(_RECV)
        except BlockingIOError:
            return
        except OSError as exc:
            self._fail(f"recv: {exc}")
            return
        t = monotonic()
        if not data:
            if self.state == _UNTIL_CLOSE:
                self._finish(t)
            elif self.state != _IDLE:
                self._fail("connection closed mid-response")
            self.close()
            return
        if self.state == _IDLE:
            return  # nothing asked; ignore stray bytes
        self._feed(data, t)

    def _feed(self, data: bytes, t: float) -> None:
        exchange = self.exchange
        if self.state == _HEAD:
            buf = self.buf + data if self.buf else data
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self.buf = buf
                return
            head = buf[:end + 2]
            data = buf[end + 4:]
            self.buf = b""
            try:
                status = int(head[9:12])
            except ValueError:
                self._fail("bad status line")
                return
            self.keep_alive = _CLOSE.search(head) is None
            length = _CONTENT_LENGTH.search(head)
            if _CHUNKED.search(head):
                self.state, self.remaining = _CHUNK, -1
            elif length is not None:
                self.state, self.remaining = _LENGTH, int(length.group(1))
            else:
                self.state = _UNTIL_CLOSE
            exchange.on_head(status, t)
            if self.state == _LENGTH and self.remaining == 0:
                self._finish(t)
                return
        if not data:
            return
        if self.state == _LENGTH:
            if len(data) >= self.remaining:
                exchange.on_body(data[:self.remaining], t)
                self.remaining = 0
                self._finish(t)
            else:
                self.remaining -= len(data)
                exchange.on_body(data, t)
        elif self.state == _CHUNK:
            self._chunks(data, t)
        elif self.state == _UNTIL_CLOSE:
            exchange.on_body(data, t)

    def _chunks(self, data: bytes, t: float) -> None:
        # remaining > 0: bytes left in the current chunk; 0: its CRLF is due; -1: a size line is.
        buf = self.buf + data if self.buf else data
        pos, n = 0, len(buf)
        exchange = self.exchange
        while pos < n:
            if self.remaining > 0:
                take = min(self.remaining, n - pos)
                exchange.on_body(buf[pos:pos + take], t)
                pos += take
                self.remaining -= take
            elif self.remaining == 0:
                if n - pos < 2:
                    break
                pos += 2
                self.remaining = -1
            else:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(buf[pos:eol].split(b";", 1)[0], 16)
                if size == 0:
                    # Last chunk; no trailers are expected, only the final CRLF.
                    if buf.find(b"\r\n", eol + 2) < 0:
                        break
                    self.buf = b""
                    self._finish(t)
                    return
                pos = eol + 2
                self.remaining = size
        self.buf = buf[pos:]

    def _finish(self, t: float) -> None:
        exchange = self.exchange
        self.state = _IDLE
        self.exchange = None
        self.out = None
        if not self.keep_alive:
            self.close()
        exchange.on_done(t)

    def _fail(self, reason: str) -> None:
        exchange = self.exchange
        self.state = _IDLE
        self.exchange = None
        self.close()
        if exchange is not None:
            exchange.on_error(reason, monotonic())
