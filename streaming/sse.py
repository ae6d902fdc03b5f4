"""The one SSE frame writer: ``data: <json>\\n\\n`` events, ``[DONE]``, and mid-stream errors.

vLLM writes stream chunks with pydantic (compact JSON, raw UTF-8; orjson writes the same bytes),
ends every stream with ``data: [DONE]``, and reports an error after the 200 has been sent as one
event whose JSON comes from Python's ``json.dumps`` with its default separators and
``ensure_ascii=True`` (docs/text-parity.md §8.3) — unlike every other body.

Called by: the renderers and the generation resource.
Runs on: the HTTP hub.
"""
from __future__ import annotations

import json
from typing import Any

from base.errors import ApiError
from base.jsonio import dumps

DONE = b"data: [DONE]\n\n"


def frame(obj: Any) -> bytes:
    """One event carrying ``obj`` as compact JSON."""
    return b"data: " + dumps(obj) + b"\n\n"


def error_event(exc: ApiError) -> bytes:
    """The error event for a failure after streaming began, followed by ``[DONE]``."""
    payload = json.dumps({"error": {"message": exc.message, "type": exc.type,
                                    "param": exc.param, "code": exc.status}})
    return b"data: " + payload.encode("ascii") + b"\n\n" + DONE
