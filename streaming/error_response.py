"""An ``ApiError`` as raw WSGI response parts (status line, headers, body), in one place.

Used where a response is written without Falcon: a streamed body that fails before its first
byte (``streaming/body.py``) and the offload driver (``middleware/errors.wsgi_error``).

Runs on: any thread (pure functions).
"""
from __future__ import annotations

import http

from base import jsonio
from base.errors import ApiError

JSON = "application/json"


def status_line(code: int) -> str:
    """``"404 Not Found"``; an unknown code gets the phrase ``Error``."""
    try:
        return f"{code} {http.HTTPStatus(code).phrase}"
    except ValueError:
        return f"{code} Error"


def http_parts(error: ApiError) -> tuple[str, list[tuple[str, str]], bytes]:
    """Status line, headers and body of an error response."""
    body = jsonio.dumps(error.to_envelope())
    return status_line(error.status), [("Content-Type", JSON),
                                       ("Content-Length", str(len(body))), *error.headers], body
