"""vLLM 0.32's per-request headers: ``X-Vllm-Priority`` and ``X-Session-ID``.

- ``X-Vllm-Priority`` (completions, chat): the engine request's scheduling ``priority``, over
  the body's; a value ``int()`` cannot read is ignored (the body's stays), as in vLLM. One
  outside a signed 64-bit integer, which vLLM would fail to send to the engine, is a 400.
- ``X-Session-ID``: the engine request's ``session_id`` (a stable identity of related
  requests, for the engine's scheduling and KV policies). Completions and chat take the body's
  ``session_id`` first, then the header, then ``vllm_xargs.session_id`` when it is a non-empty
  string; ``/inference/v1/generate`` takes the header only. These are vLLM's orders.

Runs on: a request-pool thread (after the body was validated).
"""
from __future__ import annotations

from typing import Any

import falcon

from base.errors import InvalidRequest

PRIORITY_HEADER = "X-Vllm-Priority"
SESSION_ID_HEADER = "X-Session-ID"
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def apply_request_headers(prepared: Any, req: falcon.Request, body: dict, *,
                          from_body: bool) -> None:
    """Set ``prepared.priority``/``session_id`` from the headers (and, with ``from_body``, the
    body's ``session_id`` and ``vllm_xargs``)."""
    if from_body:
        raw = req.get_header(PRIORITY_HEADER)
        if raw is not None:
            try:
                priority = int(raw)
            except ValueError:
                priority = None
            if priority is not None:
                if not _INT64[0] <= priority <= _INT64[1]:
                    raise InvalidRequest(f"{PRIORITY_HEADER} must fit in a signed 64-bit "
                                         f"integer, got {raw!r}.", param=PRIORITY_HEADER)
                prepared.priority = priority
    prepared.session_id = session_id(body if from_body else {}, req.get_header(SESSION_ID_HEADER))


def session_id(body: dict, header: str | None) -> str | None:
    """The request's session id, in vLLM's order of sources."""
    own = body.get("session_id")
    if own:
        return own
    if header:
        return header
    xargs = body.get("vllm_xargs")
    if isinstance(xargs, dict):
        value = xargs.get("session_id")
        if isinstance(value, str) and value:
            return value
    return None
