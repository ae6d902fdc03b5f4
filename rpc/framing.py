"""gRPC's message framing and metadata rules, as pure functions (no sockets).

A gRPC message on an HTTP/2 stream is a 5-byte prefix (a compressed flag, a big-endian length)
and the serialized protobuf. ``grpc-timeout`` is an integer of at most 8 digits and a unit.
``grpc-message`` is percent-encoded. (The gRPC over HTTP/2 protocol description; docs/grpc.md §2.)

Runs on: any thread (pure functions).
"""
from __future__ import annotations

import struct
from urllib.parse import quote

from rpc.status import Code, RpcError

_PREFIX = struct.Struct(">BI")
PREFIX_SIZE = _PREFIX.size
#: gRPC's default limit on a received message (grpcio and tonic both use 4 MiB).
MAX_RECEIVE_BYTES = 4 * 1024 * 1024

_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def frame(payload: bytes) -> bytes:
    """One uncompressed message with its prefix (greenfront never compresses what it sends)."""
    return _PREFIX.pack(0, len(payload)) + payload


def unframe(buffer: bytes, max_bytes: int = MAX_RECEIVE_BYTES) -> bytes:
    """The one message a unary request body holds.

    Raises:
        RpcError: INTERNAL for a compressed message (no ``grpc-encoding`` was accepted, so the
            flag is a protocol error) or a truncated one, INVALID_ARGUMENT for trailing bytes
            or a second message, RESOURCE_EXHAUSTED past ``max_bytes``.
    """
    if len(buffer) < PREFIX_SIZE:
        raise RpcError(Code.INTERNAL, "Incomplete gRPC message: missing the 5-byte prefix")
    compressed, length = _PREFIX.unpack_from(buffer)
    if compressed:
        raise RpcError(Code.INTERNAL, "Compressed gRPC message received without a grpc-encoding")
    if length > max_bytes:
        raise RpcError(Code.RESOURCE_EXHAUSTED,
                       f"Received message larger than max ({length} vs. {max_bytes})")
    end = PREFIX_SIZE + length
    if len(buffer) < end:
        raise RpcError(Code.INTERNAL, "Incomplete gRPC message: the body ended early")
    if len(buffer) > end:
        raise RpcError(Code.UNIMPLEMENTED, "Expected one request message, got more")
    return buffer[PREFIX_SIZE:end]


def parse_timeout(value: str) -> float:
    """``grpc-timeout`` in seconds.

    Raises:
        RpcError: INTERNAL for a malformed value (as grpcio answers it).
    """
    digits, unit = value[:-1], value[-1:]
    if not (1 <= len(digits) <= 8 and digits.isdigit() and unit in _UNITS):
        raise RpcError(Code.INTERNAL, f"Invalid grpc-timeout: {value!r}")
    return int(digits) * _UNITS[unit]


def encode_message(message: str) -> str:
    """``grpc-message``'s percent-encoding: printable ASCII but '%' stays, the rest escapes."""
    return quote(message, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~")
