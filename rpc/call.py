"""One gRPC call: an HTTP/2 stream's request headers and body, and what is sent back on it.

A call is answered with response headers, zero or more messages, then trailers carrying
``grpc-status``; a call that fails before its first message gets a trailers-only response (one
HEADERS frame with the status). Sending waits for the peer's flow-control window
(``Connection.send_data``), so a client that reads slowly holds only its own streams.

The call's ``Cancellation`` is set when the peer resets the stream, the connection goes, or the
deadline (``grpc-timeout``) passes: the work behind the call aborts its engine requests through
it, as an HTTP request's does (``runtime/cancellation.py``).

Runs on: the HTTP hub (the connection's greenlets).
"""
from __future__ import annotations

from typing import Any, Protocol

from runtime.cancellation import Cancellation
from rpc.framing import encode_message, frame
from rpc.status import Code


class Sender(Protocol):
    """What a call sends through (``rpc.transport.Connection``)."""

    def send_headers(self, stream_id: int, headers: list, end_stream: bool) -> None: ...

    def send_data(self, call: "Call", data: bytes) -> None: ...

    def call_done(self, call: "Call") -> None: ...

CONTENT_TYPE = "application/grpc"


class StreamGone(Exception):
    """The peer reset the stream or the connection closed: nothing more can be sent."""


class Call:
    """A call's request side (``path``, ``metadata``, the body) and its response side."""

    def __init__(self, conn: Sender, stream_id: int, headers: dict[str, str]) -> None:
        self.conn = conn
        self.stream_id = stream_id
        self.path = headers.get(":path", "")
        self.metadata = headers
        self.body = bytearray()
        self.cancel = Cancellation()
        self.deadline_exceeded = False
        self.gone = False  # reset by the peer or connection closed
        self.headers_sent = False
        self.finished = False

    def send_message(self, payload: bytes) -> None:
        """One serialized response message (headers first if not sent yet).

        Raises:
            StreamGone: the peer is gone (the call's cancellation is set).
        """
        self._check()
        if not self.headers_sent:
            self.headers_sent = True
            self.conn.send_headers(self.stream_id, _response_headers(), end_stream=False)
        self.conn.send_data(self, frame(payload))

    def finish(self, code: Code, message: str = "") -> None:
        """End the call with its status (trailers, or trailers-only before any message)."""
        if self.finished or self.gone:
            self.finished = True
            return
        self.finished = True
        trailers = [("grpc-status", str(int(code)))]
        if message:
            trailers.append(("grpc-message", encode_message(message)))
        if not self.headers_sent:
            self.headers_sent = True
            trailers = _response_headers() + trailers
        try:
            self.conn.send_headers(self.stream_id, trailers, end_stream=True)
        except StreamGone:
            pass

    def on_gone(self) -> None:
        """The peer reset the stream or the connection closed."""
        self.gone = True
        self.cancel.cancel()

    def on_deadline(self) -> None:
        """``grpc-timeout`` passed: the work stops and the call ends DEADLINE_EXCEEDED."""
        if not self.finished:
            self.deadline_exceeded = True
            self.cancel.cancel()

    def _check(self) -> None:
        if self.gone:
            raise StreamGone()

    def __repr__(self) -> str:
        return f"<Call {self.path} stream={self.stream_id}>"


def _response_headers() -> list[tuple[str, Any]]:
    return [(":status", "200"), ("content-type", CONTENT_TYPE),
            ("grpc-accept-encoding", "identity")]
