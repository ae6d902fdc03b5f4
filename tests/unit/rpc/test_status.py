"""The one mapping from greenfront's error family to gRPC status codes (rpc/status.py)."""
from __future__ import annotations

import pytest

from base import errors
from rpc.status import Code, RpcError, status_of
from runtime.shutdown import ShuttingDown


@pytest.mark.parametrize("error, code", [
    (errors.InvalidRequest("bad"), Code.INVALID_ARGUMENT),
    (errors.RequestValidationError("bad"), Code.INVALID_ARGUMENT),
    (errors.ModelNotFound("x", ["tiny"]), Code.NOT_FOUND),
    (errors.NotFound("gone"), Code.NOT_FOUND),
    (errors.Unauthorized("key"), Code.UNAUTHENTICATED),
    (errors.PayloadTooLarge("big"), Code.RESOURCE_EXHAUSTED),
    (errors.NotImplementedApi("no"), Code.UNIMPLEMENTED),
    (errors.ServerError("boom"), Code.INTERNAL),
    (errors.EngineDead(), Code.UNAVAILABLE),
    (errors.EngineStalled("stalled"), Code.UNAVAILABLE),
    (ShuttingDown("bye"), Code.UNAVAILABLE),
    (ValueError("unexpected"), Code.INTERNAL),
])
def test_mapping(error, code):
    status = status_of(error)
    assert status.code == code
    assert str(error) in status.message


def test_rpc_errors_pass_through():
    error = RpcError(Code.FAILED_PRECONDITION, "no LoRA")
    assert status_of(error) is error


@pytest.mark.parametrize("engine_error,code,message", [
    ({"code": "validation_error", "message": "bad ids", "retryable": False},
     Code.INVALID_ARGUMENT, "bad ids"),
    ({"code": "engine_paused", "message": "paused", "retryable": True}, Code.UNAVAILABLE,
     "paused"),
    ({"code": "oom", "message": "secret detail", "retryable": False}, Code.INTERNAL,
     "Internal server error"),
    (None, Code.INTERNAL, "Internal server error"),  # a 0.32 engine's ERROR carries no reason
])
def test_a_033_engine_error_maps_as_vllm_033s_frontends_map_it(engine_error, code, message):
    status = status_of(errors.engine_request_error(engine_error))
    assert (status.code, status.message) == (code, message)
