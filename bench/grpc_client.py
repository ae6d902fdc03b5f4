"""A minimal HTTP/2 client for gRPC calls on ``bench.client``'s epoll loop (no gevent, no grpcio).

Owns ``H2Connection`` (one socket, many concurrent calls: HTTP/2 frames parsed by hand, gRPC's
5-byte message prefix, flow control, SETTINGS/PING/GOAWAY/RST_STREAM) and ``Call`` (what one
call's answer is reported to: its messages with their arrival time, then its status). Only what a
load generator of server-streaming calls needs: a request is one HEADERS frame and one DATA
frame; response header blocks go through ``hpack``'s decoder (the server's dynamic table must be
followed), DATA frames are split into gRPC messages without any HTTP/2 library.

PERF (measurement): the scenario delivers up to ~50k messages/s (1,024 streams, one message per
stream per 20 ms engine step, fewer when the server merges steps). On 4,160 recorded
``GenerateStream`` messages (64 streams): this module's frame parse and prefix split took 0.78 µs
per message, 1.55 µs with ``GenerateResponse.FromString`` (upb) to read ``num_tokens``; ``h2``'s
``H2Connection.receive_data`` and its acknowledgements took 17.6 µs per message alone. Against a
2-worker greenfront, 1,024 streams over 16 connections, 10 s each, pinned to the load side's
core: a ``grpc.aio`` client (grpcio 1.85) read 22.4k messages/s (47.5k tokens/s) at 47% of its
core, ~21 µs per message, so ~100% at the scenario's 50k; ``bench.grpc_load`` on this module read
29.4k messages/s (49.2k tokens/s) at 19%, ~6.5 µs per message with its accounting.

Runs on: the gRPC load generator process (one thread, the loop's).
"""
from __future__ import annotations

import errno
import socket
import struct
from collections import deque
from collections.abc import Iterable
from time import monotonic

import hpack

from bench.client import Loop, connect, new_socket

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HEADER = struct.Struct(">BHBBL")  # length (24 bits: high byte, low 16), type, flags, stream
_U32 = struct.Struct(">L")
_SETTING = struct.Struct(">HL")
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20
SETTINGS_ENABLE_PUSH, SETTINGS_MAX_CONCURRENT_STREAMS, SETTINGS_INITIAL_WINDOW_SIZE = 2, 3, 4
#: Our receive windows: a load generator must never make the server wait for it (SMG, a router
#: that speaks this protocol, uses 16 MiB per stream too).
STREAM_WINDOW = 1 << 24
CONN_WINDOW = 1 << 30
_RECV = 1 << 18
_IN = 0x001 | 0x008 | 0x010 | 0x2000  # EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP
_OUT = 0x004


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame."""
    n = len(payload)
    return _HEADER.pack(n >> 16, n & 0xFFFF, kind, flags, stream_id) + payload


def grpc_message(payload: bytes) -> bytes:
    """One uncompressed gRPC message: the 5-byte prefix and the serialized protobuf."""
    return b"\x00" + _U32.pack(len(payload)) + payload


def request_headers(authority: str, path: str) -> bytes:
    """The HPACK block of a gRPC request, encoded once and reused for every call: never-indexed
    literals leave the server's dynamic table alone, so the same bytes stay valid."""
    enc = hpack.Encoder()
    return enc.encode([hpack.NeverIndexedHeaderTuple(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", authority),
        ("content-type", "application/grpc"), ("te", "trailers"),
        ("user-agent", "greenfront-bench"))], huffman=False)


class Call:
    """Receives one call's answer; subclasses override what they need. Called on the loop."""

    def on_message(self, payload: bytes, t: float) -> None:
        pass

    def on_end(self, status: int, message: str, t: float) -> None:
        """The trailers (``grpc-status``; -1 when the response had none, e.g. HTTP 503)."""

    def on_error(self, reason: str, t: float) -> None:
        """A reset stream or a lost connection."""


class _Stream:
    __slots__ = ("call", "carry", "status", "message")

    def __init__(self, call: Call) -> None:
        self.call = call
        self.carry = b""


class H2Connection:
    """One HTTP/2 connection carrying many calls; ``start`` queues a call while the server's
    concurrent-stream limit or its flow-control window do not allow it yet."""

    def __init__(self, loop: Loop, host: str, port: int, headers: bytes) -> None:
        self.loop = loop
        self.headers = headers
        self.sock = new_socket()
        self.fd = self.sock.fileno()
        self.connected = self.closed = self.going_away = False
        self.streams: dict[int, _Stream] = {}
        self.pending: deque[tuple[bytes, Call]] = deque()
        self.next_id = 1
        self.max_streams = 100  # until the server's SETTINGS say (RFC 9113 recommends >= 100)
        self.send_window = 65535  # the server's connection window for our DATA
        self.unacked = 0  # DATA bytes received since our last connection WINDOW_UPDATE
        self.buf = b""
        self.out = bytearray(PREFACE + frame(SETTINGS, 0, 0, b"".join(
            _SETTING.pack(k, v) for k, v in ((SETTINGS_ENABLE_PUSH, 0),
                                             (SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW))))
            + frame(WINDOW_UPDATE, 0, 0, _U32.pack(CONN_WINDOW - 65535)))
        self.decoder = hpack.Decoder()
        self._block: list[bytes] = []  # a header block's fragments until END_HEADERS
        self._block_stream = 0
        self._block_end = False
        connect(loop, self, host, port)

    @property
    def usable(self) -> bool:
        return not (self.closed or self.going_away)

    def start(self, message: bytes, call: Call) -> None:
        """Start a call whose request is ``message`` (already gRPC-framed)."""
        self.pending.append((message, call))
        self._open_pending()
        self._flush()

    def _open_pending(self) -> None:
        pending = self.pending
        while pending and len(self.streams) < self.max_streams \
                and len(pending[0][0]) <= self.send_window:
            message, call = pending.popleft()
            sid = self.next_id
            self.next_id += 2
            self.streams[sid] = _Stream(call)
            self.send_window -= len(message)
            self.out += frame(HEADERS, END_HEADERS, sid, self.headers)
            self.out += frame(DATA, END_STREAM, sid, message)

    def close(self, reason: str | None = None) -> None:
        """Close the socket; with a ``reason`` (a failure, not the run's end: ``Loop.close``)
        the calls still open end with ``on_error(reason)``."""
        if self.closed:
            return
        self.closed = True
        self.loop.conns.pop(self.fd, None)
        try:
            self.loop.epoll.unregister(self.fd)
        except (OSError, ValueError):
            pass
        self.sock.close()
        if reason is None:
            return
        t = monotonic()
        streams, self.streams = self.streams, {}
        for stream in streams.values():
            stream.call.on_error(reason, t)
        pending, self.pending = self.pending, deque()
        for _, call in pending:
            call.on_error(reason, t)

    # -- socket events ----------------------------------------------------------------------

    def on_events(self, events: int) -> None:
        if events & _OUT:
            if not self.connected:
                err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    self.close(f"connect: {errno.errorcode.get(err, err)}")
                    return
                self.connected = True
            self._flush()
        if events & _IN and not self.closed:
            try:
                data = self.sock.recv(_RECV)
            except BlockingIOError:
                return
            except OSError as exc:
                self.close(f"recv: {exc}")
                return
            if not data:
                self.close("connection closed by the server")
                return
            self.feed(data, monotonic())
            self._flush()

    def _flush(self) -> None:
        if self.closed or not self.connected:
            return
        if self.out:
            try:
                sent = self.sock.send(self.out)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                self.close(f"send: {exc}")
                return
            del self.out[:sent]
        want = bool(self.out)
        if want != self._want_out:
            self._want_out = want
            self.loop.epoll.modify(self.fd, _IN | _OUT if want else _IN)

    # -- frames -------------------------------------------------------------------------------

    def feed(self, data: bytes, t: float) -> None:
        """Parse the frames in ``data`` (the socket's bytes, in order) and report them."""
        buf = self.buf + data if self.buf else data
        pos, n = 0, len(buf)
        unpack = _HEADER.unpack_from
        streams = self.streams
        while n - pos >= 9:
            hi, lo, kind, flags, sid = unpack(buf, pos)
            end = pos + 9 + (hi << 16 | lo)
            if end > n:
                break
            if kind == DATA:
                # The hot path: one gRPC message per frame, usually.
                self.unacked += end - pos - 9
                stream = streams.get(sid)
                if stream is not None:
                    start = pos + 9
                    if flags & PADDED:
                        end_data = end - buf[start]
                        start += 1
                    else:
                        end_data = end
                    self._data(stream, buf[start:end_data], t)
                    if flags & END_STREAM:
                        self._ended(sid, -1, "stream ended without trailers", t)
            else:
                self._control(kind, flags, sid, buf[pos + 9:end], t)
                if self.closed:
                    return
            pos = end
        self.buf = buf[pos:]
        if self.unacked >= CONN_WINDOW // 2:
            self.out += frame(WINDOW_UPDATE, 0, 0, _U32.pack(self.unacked))
            self.unacked = 0

    def _data(self, stream: _Stream, chunk: bytes, t: float) -> None:
        if stream.carry:
            chunk = stream.carry + chunk
        pos, n = 0, len(chunk)
        call = stream.call
        while n - pos >= 5:
            end = pos + 5 + _U32.unpack_from(chunk, pos + 1)[0]
            if end > n:
                break
            call.on_message(chunk[pos + 5:end], t)
            pos = end
        stream.carry = chunk[pos:] if pos < n else b""

    def _control(self, kind: int, flags: int, sid: int, payload: bytes, t: float) -> None:
        if kind in (HEADERS, CONTINUATION):
            if kind == HEADERS:
                start, end = 0, len(payload)
                if flags & PADDED:
                    start, end = 1, end - payload[0]
                if flags & PRIORITY_FLAG:
                    start += 5
                self._block, self._block_stream = [payload[start:end]], sid
                self._block_end = bool(flags & END_STREAM)
            else:
                self._block.append(payload)
            if flags & END_HEADERS:
                self._headers(self._block_stream, b"".join(self._block), self._block_end, t)
                self._block = []
        elif kind == SETTINGS:
            if not flags & ACK:
                for i in range(0, len(payload) - 5, 6):
                    key, value = _SETTING.unpack_from(payload, i)
                    if key == SETTINGS_MAX_CONCURRENT_STREAMS:
                        self.max_streams = value
                self.out += frame(SETTINGS, ACK, 0)
                self._open_pending()
        elif kind == WINDOW_UPDATE:
            if sid == 0:
                self.send_window += _U32.unpack(payload)[0] & 0x7FFFFFFF
                self._open_pending()
        elif kind == PING:
            if not flags & ACK:
                self.out += frame(PING, ACK, 0, payload)
        elif kind == RST_STREAM:
            stream = self.streams.pop(sid, None)
            if stream is not None:
                stream.call.on_error(f"stream reset (HTTP/2 error {_U32.unpack(payload)[0]})", t)
                self._open_pending()
        elif kind == GOAWAY:
            last = _U32.unpack_from(payload)[0] & 0x7FFFFFFF
            self.going_away = True
            for gone in [s for s in self.streams if s > last]:
                self.streams.pop(gone).call.on_error("GOAWAY before the call started", t)
            pending, self.pending = self.pending, deque()
            for _, call in pending:
                call.on_error("GOAWAY before the call started", t)
            if not self.streams:
                self.close("GOAWAY")
        # PRIORITY and unknown frames are ignored; PUSH_PROMISE is disabled by our SETTINGS.

    def _headers(self, sid: int, block: bytes, end_stream: bool, t: float) -> None:
        headers = dict(self.decoder.decode(block))  # always: the dynamic table must follow
        stream = self.streams.get(sid)
        if stream is None:
            return
        if end_stream:
            status = headers.get("grpc-status")
            if status is None:
                self._ended(sid, -1, f"HTTP {headers.get(':status', '?')} without grpc-status", t)
            else:
                self._ended(sid, int(status), headers.get("grpc-message", ""), t)
        elif headers.get(":status") != "200":
            # Trailers will not come for a non-gRPC answer; report it now.
            self._ended(sid, -1, f"HTTP {headers.get(':status', '?')}", t)
            self.out += frame(RST_STREAM, 0, sid, _U32.pack(8))  # CANCEL

    def _ended(self, sid: int, status: int, message: str, t: float) -> None:
        stream = self.streams.pop(sid, None)
        if stream is None:
            return
        stream.call.on_end(status, message, t)
        if self.going_away and not self.streams:
            self.close("GOAWAY")
        else:
            self._open_pending()


def split_frames(data: bytes) -> Iterable[tuple[int, int, int, bytes]]:
    """(type, flags, stream id, payload) of each complete frame in ``data`` (tests, tools)."""
    pos = 0
    while len(data) - pos >= 9:
        hi, lo, kind, flags, sid = _HEADER.unpack_from(data, pos)
        end = pos + 9 + (hi << 16 | lo)
        if end > len(data):
            return
        yield kind, flags, sid, data[pos + 9:end]
        pos = end
