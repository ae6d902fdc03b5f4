"""A streamed completion on a raw socket, for tests of what happens while a client holds one
open, stops reading, or goes away."""
from __future__ import annotations

import json
import socket


def open_stream(url: str, body: dict, events: int = 1, timeout: float = 60.0) -> socket.socket:
    """POST ``body`` (a streamed request) to ``url``'s /v1/completions and read until ``events``
    SSE events arrived; the rest is left unread, and closing the socket is the client's
    disconnect."""
    payload = json.dumps(body).encode()
    host, port = url.rsplit("//", 1)[1].split(":")
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
    received = b""
    while received.count(b"data: ") < events:
        chunk = sock.recv(65536)
        assert chunk, received  # the server closed before the events came
        received += chunk
    return sock
