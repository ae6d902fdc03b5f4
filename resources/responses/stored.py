"""The Responses store's side of the endpoint: saving a finished response, replaying
``previous_response_id``, and ``GET /v1/responses/{id}`` / ``POST /v1/responses/{id}/cancel``.

Store I/O runs on request pool threads (``runtime.response_store``): lookups during conversion
already run there; the HTTP hub hands a finished response's write to the pool and waits for it
in that request's greenlet only, so a follow-up turn sent after the answer always finds it.

Runs on: request pool threads (history), the HTTP hub (saving, the GET and cancel routes).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import falcon

from base import jsonio
from base.config import Config
from base.errors import ApiError, InvalidRequest
from resources.responses.items import input_messages
from runtime.request_pool import get_pool
from runtime.response_store import ResponseStore, store_for

log = logging.getLogger("greenfront.responses")


class ResponseNotFound(ApiError):
    """vLLM's 404 for an unknown, unstored or evicted response id."""

    status = 404
    type = "invalid_request_error"

    def __init__(self, response_id: str) -> None:
        super().__init__(f"Response with id '{response_id}' not found.")
        self.param = "response_id"


class CannotCancel(ApiError):
    status = 400
    type = "invalid_request_error"

    def __init__(self) -> None:
        super().__init__("Cannot cancel a synchronous response.")
        self.param = "response_id"


def _record(store: ResponseStore | None, response_id: str) -> dict:
    raw = store.get(response_id) if store is not None else None
    if raw is None:
        raise ResponseNotFound(response_id)
    return jsonio.loads(raw)


def history(store: ResponseStore | None, response_id: str) -> list[dict]:
    """Pool thread: the chat messages a follow-up of ``response_id`` starts from: that request's
    messages (its system message left out: instructions do not carry over), then its output's
    messages and function calls as one assistant turn. vLLM 0.32 replays only the message items
    and drops the calls, leaving the model a tool result without its call; OpenAI's API replays
    both, and so does greenfront. Reasoning items are left out, as both do.

    Raises:
        ResponseNotFound: the id is unknown, was not stored, or was evicted.
    """
    record = _record(store, response_id)
    out = [m for m in record["messages"] if m.get("role") != "system"]
    replayed = [item for item in record["response"]["output"]
                if item.get("type") in ("message", "function_call")]
    return out + input_messages(replayed)


def saver(config: Config, store: ResponseStore, messages: list[dict]) -> Callable[[dict], None]:
    """HTTP hub: a function that stores a finished response (with ``messages``) through the pool."""
    def save(response: dict) -> None:
        record = jsonio.dumps({"response": response, "messages": messages})
        try:
            get_pool(config).apply(store.put, (response["id"], record))
        except Exception:  # the answer is still good; only a later lookup will miss it
            log.exception("could not store response %s", response["id"])
    return save


class _StoreRoute:
    def __init__(self, config: Config) -> None:
        self._config = config

    def _lookup(self, response_id: str) -> dict:
        """HTTP hub: the stored record, read on a pool thread."""
        store = store_for(self._config)
        return get_pool(self._config).apply(_record, (store, response_id))


class StoredResponseResource(_StoreRoute):
    """``GET /v1/responses/{response_id}``: a stored response (404 when there is none)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, response_id: str) -> None:
        if req.get_param_as_bool("stream"):
            raise InvalidRequest("Streaming a stored response is only for background responses, "
                                 "which greenfront does not serve.", param="stream")
        resp.data = jsonio.dumps(self._lookup(response_id)["response"])
        resp.content_type = falcon.MEDIA_JSON


class CancelResponseResource(_StoreRoute):
    """``POST /v1/responses/{response_id}/cancel``: vLLM's answers (only background responses
    can be cancelled, and greenfront has none)."""

    def on_post(self, req: falcon.Request, resp: Any, response_id: str) -> None:
        self._lookup(response_id)
        raise CannotCancel()
