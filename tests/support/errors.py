"""Error assertions: the OpenAI envelope of an ``ApiError`` raised in-process, and of an HTTP
response."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from base.errors import ApiError
from base.jsonio import dumps

ENVELOPE_KEYS = {"message", "type", "param", "code"}


def raised(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[int, bytes]:
    """Call ``fn``, which must raise an ``ApiError``: its status and envelope bytes."""
    with pytest.raises(ApiError) as info:
        fn(*args, **kwargs)
    return info.value.status, dumps(info.value.to_envelope())


def raised_text(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[int, str]:
    """``raised`` with the envelope as text."""
    status, body = raised(fn, *args, **kwargs)
    return status, body.decode()


def error_of(resp: Any, status: int) -> dict:
    """An HTTP response (``requests``/``httpx``/falcon.testing) that must be the OpenAI error
    envelope with ``status``: its ``error`` object."""
    code = getattr(resp, "status_code", None) or getattr(resp, "status", None)
    assert code == status or str(code).startswith(str(status)), getattr(resp, "text", resp)
    body = resp.json
    body = body() if callable(body) else body
    assert set(body) == {"error"}, body
    assert set(body["error"]) == ENVELOPE_KEYS, body
    assert body["error"]["code"] == status
    return body["error"]
