"""gRPC status codes, and the one mapping from greenfront's error family to them.

Everything below the gRPC services raises ``base.errors.ApiError`` subclasses (the HTTP side maps
the same errors to its envelope in ``middleware/errors.py``); ``status_of`` turns one into a
gRPC status here, once. Code that only exists on the gRPC side raises ``RpcError``.

Runs on: any thread (pure data).
"""
from __future__ import annotations

import enum

from base.errors import ApiError, EngineUnavailable, ModelNotFound, NotFound


class Code(enum.IntEnum):
    """gRPC's status codes (the numbers are the wire contract)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class RpcError(Exception):
    """A gRPC status to answer a call with."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


#: HTTP statuses of the error family -> gRPC codes (the usual HTTP/gRPC correspondence).
_BY_HTTP_STATUS = {
    400: Code.INVALID_ARGUMENT,
    401: Code.UNAUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    404: Code.NOT_FOUND,
    409: Code.ALREADY_EXISTS,
    413: Code.RESOURCE_EXHAUSTED,
    429: Code.RESOURCE_EXHAUSTED,
    501: Code.UNIMPLEMENTED,
    503: Code.UNAVAILABLE,
}


def status_of(error: BaseException) -> RpcError:
    """The gRPC status of any error a call raised (unknown exceptions are INTERNAL)."""
    if isinstance(error, RpcError):
        return error
    if isinstance(error, ModelNotFound):
        return RpcError(Code.NOT_FOUND, error.message)
    if isinstance(error, (EngineUnavailable, NotFound)):
        return RpcError(_BY_HTTP_STATUS[error.status], error.message)
    if isinstance(error, ApiError):
        return RpcError(_BY_HTTP_STATUS.get(error.status, Code.INTERNAL), error.message)
    return RpcError(Code.INTERNAL, f"Internal server error: {error}")
