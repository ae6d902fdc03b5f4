"""Reading a JSON request body the way vLLM does: application/json only, parsed with jsonio.

Runs on: whichever thread runs the Falcon call.
"""
from __future__ import annotations

from typing import Any

import falcon

from base import jsonio
from base.errors import RequestValidationError


def read_json(req: falcon.Request) -> Any:
    """The parsed body; 400 for a non-JSON content type or invalid JSON (docs/text-parity.md §8.2)."""
    content_type = (req.content_type or "").split(";", 1)[0].strip().lower()
    if content_type != "application/json":
        raise RequestValidationError(
            "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed")
    return jsonio.loads_body(req.bounded_stream.read())
