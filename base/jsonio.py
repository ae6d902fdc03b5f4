"""The one JSON encoder/decoder of greenfront (orjson).

vLLM serializes bodies compactly with raw UTF-8; orjson does the same by default. Everything that
writes or reads JSON goes through ``dumps``/``loads`` so that the choice is made once.

Runs on: any thread.
"""
from __future__ import annotations

from typing import Any

import orjson

from base.errors import RequestValidationError
from base.token_ids import TokenIds

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _default(obj: Any) -> Any:
    # A prompt's ids through orjson's numpy path: 0.43 ms for 82k ids against 1.0 ms as a list
    # (token_ids.py); the same JSON.
    if isinstance(obj, TokenIds):
        return obj.array
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes; non-str dict keys (token ids) become strings as in vLLM."""
    return orjson.dumps(obj, default=_default, option=_OPTIONS)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def loads_body(data: bytes) -> Any:
    """Parse a request body, raising the 400 that vLLM gives for invalid JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        err = RequestValidationError(
            f"1 validation error:\n  {{'type': 'json_invalid', 'loc': 'body.{exc.pos}', "
            f"'msg': 'JSON decode error', 'input': '<dict of 0 items>', "
            f"'ctx': {{'error': '{exc.msg}'}}}}",
            )
        err.param = f"body.{exc.pos}"
        raise err from None
