"""Runs one gRPC call: route, check the request's metadata, parse, answer, end with a status.

Each call whose request has ended gets a greenlet here. Errors of any kind end the call with the
status ``rpc.status.status_of`` gives them; a call whose deadline passed ends DEADLINE_EXCEEDED;
a call whose peer went away ends silently (its work was cancelled and its engine requests
aborted). ``serve_connection`` is what the worker's gRPC listener runs per accepted connection.

Runs on: the HTTP hub.
"""
from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from typing import Any, Callable

import gevent
from google.protobuf.message import DecodeError

from rpc.call import CONTENT_TYPE, Call, StreamGone
from rpc.framing import parse_timeout, unframe
from rpc.status import Code, RpcError, status_of
from rpc.transport import Connection

log = logging.getLogger("greenfront.grpc")


@dataclass(frozen=True)
class Method:
    """One RPC: how its request parses and what answers it (``handler(call, request)`` returns a
    message, or for a server-streaming RPC an iterable of messages)."""

    request_type: Any
    handler: Callable[[Call, Any], Any]
    streaming: bool = False


Router = Callable[[str], "Method | None"]


def serve_connection(sock: socket.socket, router: Router,
                     accepting: Callable[[], bool] = lambda: True,
                     on_open: Callable[[Connection], None] | None = None,
                     on_close: Callable[[Connection], None] | None = None) -> None:
    """Serve one accepted connection until it closes (the listener's handler)."""
    conn = Connection(sock, lambda call: gevent.spawn(run_call, call, router, accepting))
    if on_open is not None:
        on_open(conn)
    try:
        conn.serve()
    finally:
        if on_close is not None:
            on_close(conn)


def run_call(call: Call, router: Router, accepting: Callable[[], bool]) -> None:
    """A call's greenlet: its whole life, from routing to the final status."""
    timer = None
    result: Any = None
    try:
        method = _route(call, router, accepting)
        raw = call.metadata.get("grpc-timeout")
        if raw is not None:
            timer = gevent.spawn_later(parse_timeout(raw), call.on_deadline)
        try:
            request = method.request_type.FromString(unframe(bytes(call.body)))
        except DecodeError as exc:
            raise RpcError(Code.INTERNAL, f"Failed to parse the request message: {exc}") from None
        result = method.handler(call, request)
        if method.streaming:
            for message in result:
                call.send_message(message.SerializeToString())
        else:
            call.send_message(result.SerializeToString())
        _finish_ok(call)
    except StreamGone:  # cancelled: by the peer (nothing is sent) or by the deadline
        _finish_ok(call)
    except Exception as exc:  # every failure becomes the call's status, never a dropped stream
        if call.deadline_exceeded:
            call.finish(Code.DEADLINE_EXCEEDED, "Deadline Exceeded")
        else:
            status = status_of(exc)
            if status.code == Code.INTERNAL:
                log.exception("gRPC call %s failed", call.path)
            call.finish(status.code, status.message)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
        if timer is not None:
            timer.kill(block=False)
        call.conn.call_done(call)


def _finish_ok(call: Call) -> None:
    if call.deadline_exceeded:
        call.finish(Code.DEADLINE_EXCEEDED, "Deadline Exceeded")
    elif call.gone:
        call.finish(Code.CANCELLED)
    else:
        call.finish(Code.OK)


def _route(call: Call, router: Router, accepting: Callable[[], bool]) -> Method:
    """The call's method, after the checks every call gets."""
    meta = call.metadata
    if meta.get(":method") != "POST":
        raise RpcError(Code.UNIMPLEMENTED, f"Method {meta.get(':method')} is not supported")
    content_type = meta.get("content-type", "")
    if not (content_type == CONTENT_TYPE or content_type.startswith(CONTENT_TYPE + "+")
            or content_type.startswith(CONTENT_TYPE + ";")):
        raise RpcError(Code.INTERNAL, f"Unsupported content-type: {content_type!r}")
    encoding = meta.get("grpc-encoding", "identity")
    if encoding != "identity":
        raise RpcError(Code.UNIMPLEMENTED,
                       f"Content is compressed with `{encoding}` which isn't supported")
    method = router(call.path)
    if method is None:
        raise RpcError(Code.UNIMPLEMENTED, f"Method not found: {call.path}")
    if not accepting():
        raise RpcError(Code.UNAVAILABLE, "The server is shutting down")
    return method
