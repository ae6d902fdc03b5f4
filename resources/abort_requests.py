"""``POST /inference/v1/abort_requests``: abort requests by the ids vLLM gives them; with
``--tokens-only`` also at the legacy unauthenticated ``POST /abort_requests``.

vLLM 0.32's scale-out surface (with ``/inference/v1/generate``): a router that sent a request
stops it by its external id (``generate-tokens-<id>``, ``cmpl-<id>-<prompt>``,
``chatcmpl-<id>``), in a JSON body ``{"request_ids": [...]}``. The answer is an empty 200 at
once; each aborted request's own response ends as vLLM ends it, with finish reason ``abort``.
The requests may run on any worker: this worker aborts its own and tells the others over the
worker bus (``runtime.worker_bus``). Bad bodies get vLLM's 400s; a body that is not an object,
or ids that are not strings, a 400 too (vLLM answers 500 or 200 and fails later)
(``docs/parity.md`` §4).

Runs on: the HTTP hub.
"""
from __future__ import annotations

import json

import falcon

from base.errors import RequestValidationError
from runtime.state import WorkerState

#: The worker bus topic other workers abort on.
TOPIC = "abort"


class AbortRequestsResource:
    """Aborts the named requests in the whole deployment."""

    media_type = None  # an empty body

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        ids = request_ids(req.bounded_stream.read())
        state = self._state
        state.ensure_started()
        if ids:
            if state.client is not None:
                state.client.abort_external(ids)
            if state.bus is not None:
                state.bus.broadcast(TOPIC, ids)
        resp.status = falcon.HTTP_200
        resp.content_type = None
        resp.data = b""


class LegacyAbortRequestsResource(AbortRequestsResource):
    """Aborts the named requests (``--tokens-only``'s unauthenticated legacy path)."""


def request_ids(body: bytes) -> list[str]:
    """The ids a body names (a string or a list of strings), or vLLM's 400."""
    try:
        parsed = json.loads(body)  # the standard library's, for Starlette's messages
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestValidationError(f"JSON decode error: {exc}") from None
    if not isinstance(parsed, dict):
        raise RequestValidationError("The request body must be a JSON object with "
                                     "'request_ids'.")
    ids = parsed.get("request_ids")
    if ids is None:
        raise RequestValidationError("Missing 'request_ids' in request body")
    if isinstance(ids, str):
        return [ids]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise RequestValidationError("'request_ids' must be a string or a list of strings.")
    return ids
