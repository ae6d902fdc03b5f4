"""Errors → HTTP, in one place: the OpenAI envelope for ApiError, Falcon's errors and crashes.

``install`` registers the Falcon handlers; ``wsgi_error`` answers errors that happen outside
Falcon (in the offload driver). Both build the envelope from ``ApiError.to_envelope``; ``streaming.error_response`` has the
WSGI parts.

Runs on: whichever thread runs the Falcon call (pool thread or HTTP hub).
"""
from __future__ import annotations

import http
import logging
from typing import Any, Callable

import falcon

from base import jsonio
from base.errors import ApiError, ServerError
from streaming.error_response import JSON, http_parts

log = logging.getLogger("greenfront.errors")

def wsgi_error(start_response: Callable, error: ApiError) -> list[bytes]:
    status, headers, body = http_parts(error)
    start_response(status, headers)
    return [body]


def _render(resp: falcon.Response, error: ApiError) -> None:
    resp.status = error.status
    resp.content_type = JSON
    for name, value in error.headers:
        resp.set_header(name, value)
    resp.data = jsonio.dumps(error.to_envelope())


def _api_error(req: falcon.Request, resp: falcon.Response, error: ApiError, params: Any) -> None:
    _render(resp, error)


def _http_error(req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError,
                params: Any) -> None:
    api = ApiError(error.description or error.title or "error")
    api.status = error.status_code
    api.type = http.HTTPStatus(error.status_code).phrase.replace(" ", "") + "Error" \
        if error.status_code != 404 else "NotFoundError"
    _render(resp, api)
    for name, value in (error.headers or {}).items():
        resp.set_header(name, value)


def _unexpected(req: falcon.Request, resp: falcon.Response, error: Exception,
                params: Any) -> None:
    if isinstance(error, falcon.HTTPError):
        return _http_error(req, resp, error, params)
    # A crash in request work is a 500 for this request only; the worker lives on.
    log.exception("unhandled error in %s %s", req.method, req.path)
    _render(resp, ServerError(f"Internal server error: {type(error).__name__}: {error}"))


def install(app: falcon.App) -> None:
    """Register the handlers; the most specific one wins in Falcon."""
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, _http_error)
    app.add_error_handler(ApiError, _api_error)
