"""The one error family of greenfront, and its OpenAI envelope.

Code anywhere (resources, conversion, the engine client) raises an ``ApiError`` subclass; the
error middleware maps it to HTTP once, through ``status`` and ``to_envelope``. Nothing returns
errors as values.

Runs on: any thread (pure data).
"""
from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error with an HTTP status and an OpenAI-shaped body.

    Attributes:
        status: HTTP status code.
        type: the OpenAI ``error.type`` string (vLLM's spelling).
        param: the offending request parameter, or None.
    """

    status: int = 500
    type: str = "InternalServerError"
    #: Extra response headers (``Retry-After`` on an admission refusal).
    headers: tuple[tuple[str, str], ...] = ()
    #: The API whose envelope the error is written in: None (not decided) and "openai" give
    #: OpenAI's, "anthropic" Anthropic's (``/v1/messages``' handler errors, as vLLM answers them).
    envelope: str | None = None

    def __init__(self, message: str, *, param: str | None = None, value: Any = None,
                 show_value: bool = False) -> None:
        # NOTE: vLLM's VLLMValidationError appends "(parameter=p, value=v)" with only the parts
        # that are set; we reproduce it so messages read the same as vLLM's.
        parts = []
        if param is not None:
            parts.append(f"parameter={param}")
        if show_value:
            parts.append(f"value={value}")
        if parts:
            message = f"{message} ({', '.join(parts)})"
        super().__init__(message)
        self.message = message
        self.param = param

    def to_envelope(self) -> dict[str, Any]:
        if self.envelope == "anthropic":
            return {"type": "error", "error": {"type": self.type, "message": self.message}}
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.status}}


def in_envelope(error: ApiError, envelope: str) -> ApiError:
    """``error`` written in ``envelope`` unless an earlier stage already chose one."""
    if error.envelope is None:
        error.envelope = envelope
    return error


class InvalidRequest(ApiError):
    """400: the request is well-formed JSON but semantically wrong (vLLM's BadRequestError)."""
    status = 400
    type = "BadRequestError"


class RequestValidationError(ApiError):
    """400: the body failed schema validation (vLLM/FastAPI's "Bad Request" family)."""
    status = 400
    type = "Bad Request"


class Unauthorized(ApiError):
    status = 401
    type = "Unauthorized"


class NotFound(ApiError):
    status = 404
    type = "NotFoundError"


class ModelNotFound(NotFound):
    def __init__(self, model: str, valid: list[str] | tuple[str, ...]) -> None:
        super().__init__(f"The model `{model}` does not exist. Valid aliases: {', '.join(valid)}.")
        self.param = "model"


class PayloadTooLarge(ApiError):
    status = 413
    type = "PayloadTooLarge"


class NotImplementedApi(ApiError):
    status = 501
    type = "NotImplementedError"


class ServerError(ApiError):
    """500: a failure inside greenfront or a request-level engine error."""
    status = 500
    type = "InternalServerError"


class EngineFailed(ServerError):
    """500 for a request in flight when its engine core died: vLLM's ``EngineDeadError`` answer,
    its message word for word (the reason is in the log; docs/parity.md §8)."""

    def __init__(self) -> None:
        super().__init__("EngineCore encountered an issue. See stack trace (above) for the root "
                         "cause.")


class EngineUnavailable(ApiError):
    """503: the engine is dead, not yet registered, or shutting down."""
    status = 503
    type = "ServiceUnavailableError"


class EngineStalled(EngineUnavailable):
    """503: an engine said nothing for the stall timeout (hung step, deadlock, stopped process)."""


class EngineDead(EngineUnavailable):
    def __init__(self, message: str = "The engine core has died; the server cannot serve requests.") -> None:
        super().__init__(message)


def engine_request_error(error: Any) -> ApiError:
    """The answer to an output that finished with ERROR (docs/vllm-versions.md §2).

    ``error`` is vLLM 0.33's ``{code, message, retryable}`` (None from 0.32 engines, which
    carry no reason): ``validation_error`` is the client's fault (400, the engine's message), a
    retryable error (``engine_paused``) a 503 with the engine's message, anything else vLLM's
    fixed 500.
    """
    if isinstance(error, dict):
        message = error.get("message")
        message = message if isinstance(message, str) and message else "Internal server error"
        if error.get("code") == "validation_error":
            return InvalidRequest(message)
        if error.get("retryable") is True:
            return EngineUnavailable(message)
    return ServerError("Internal server error")
