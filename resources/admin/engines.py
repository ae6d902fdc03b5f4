"""What every admin route shares: UTILITY calls fanned out over the engine ranks, query params.

vLLM 0.32's frontend with several engines (``DPLBAsyncMPClient``) sends *every* utility call to
every engine and keeps the first engine's result; for a few methods it combines them instead
(``reset_prefix_cache``/``wake_up``: all(); ``is_sleeping``/``is_scheduler_paused``/
``get_weight_version``: all must agree). ``call_all`` and ``consensus`` are those two shapes.
The calls to the ranks run concurrently (one greenlet each), like vLLM's ``asyncio.gather``.

Runs on: the HTTP hub (``EngineClient.utility`` blocks only the calling greenlet).
"""
from __future__ import annotations

from typing import Any

import falcon
import gevent

from base import jsonio
from engine.client import EngineClient
from base.errors import ApiError, ServerError
from resources.common.fields import INVALID, Validator, validation_error
from runtime.state import WorkerState

#: Quick queries and cache resets: an engine that does not answer in this time is stuck.
QUICK_TIMEOUT = 60.0
#: Sleep, wake-up, pause (mode=wait drains running requests), LoRA loads (may download) and
#: collective RPCs have no natural bound; vLLM waits for them without a timeout, so do we.
#: Engine death still ends the wait (``EngineClient`` fails every pending call).
NO_TIMEOUT = None


def engine_client(state: WorkerState) -> EngineClient:
    """The worker's engine client, or the 503 of engines that cannot take calls."""
    state.ensure_started()
    client = state.client
    assert client is not None  # ensure_started made it
    client.check_available()
    return client


def call_each(client: EngineClient, method: str, args: list | tuple = (),
              timeout: float | None = QUICK_TIMEOUT,
              ranks: list[int] | None = None) -> list[tuple[int, bool, Any]]:
    """``method(*args)`` on each rank at once: ``(rank, ok, result or ApiError)`` in rank order."""
    ranks = list(client.ranks if ranks is None else ranks)

    def one(rank: int) -> tuple[int, bool, Any]:
        try:
            return rank, True, client.utility(method, args, rank=rank, timeout=timeout)
        except ApiError as exc:  # returned, not raised: a failed greenlet would log a traceback
            return rank, False, exc

    if len(ranks) == 1:
        return [one(ranks[0])]
    jobs = [gevent.spawn(one, rank) for rank in ranks]
    gevent.joinall(jobs)
    out = []
    for job in jobs:
        if job.exception is not None:  # not an ApiError: a bug, surface it as such
            raise ServerError(f"Internal error calling `{method}`: {job.exception}")
        out.append(job.value)
    return out


def call_all(client: EngineClient, method: str, args: list | tuple = (),
             timeout: float | None = QUICK_TIMEOUT) -> list[Any]:
    """Results of ``method`` on every rank; the lowest failing rank's error is raised."""
    results = call_each(client, method, args, timeout)
    for _rank, ok, value in results:
        if not ok:
            raise value
    return [value for _rank, _ok, value in results]


def consensus(client: EngineClient, method: str, args: list | tuple = (),
              timeout: float | None = QUICK_TIMEOUT) -> Any:
    """The one value every rank returned; a 500 with vLLM's message when they disagree."""
    results = call_all(client, method, args, timeout)
    if any(r != results[0] for r in results):
        raise ServerError(f"Engines returned different {method} results: {results}")
    return results[0]


# -- responses ---------------------------------------------------------------------------------
def reply_json(resp: falcon.Response, body: Any, status: int = 200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = jsonio.dumps(body)


def reply_empty(resp: falcon.Response) -> None:
    """vLLM's ``Response(status_code=200)``: no body."""
    resp.status = falcon.HTTP_200
    resp.data = b""


# -- query parameters --------------------------------------------------------------------------
class Query:
    """Reads query parameters with the request-field validators, collecting every error so that
    one 400 lists them all (FastAPI's ``Query`` validation, worded by vLLM's handler)."""

    def __init__(self, req: falcon.Request) -> None:
        self._req = req
        self._errors: list[dict] = []

    def get(self, name: str, validator: Validator, default: Any) -> Any:
        raw = self._req.get_param(name)  # the last value when repeated, as FastAPI does
        if raw is None:
            return default
        value = validator(raw, ("query", name), self._errors)
        return default if value is INVALID else value

    def get_list(self, name: str) -> list[str]:
        return self._req.get_param_as_list(name) or []

    def check(self) -> None:
        """Raise the 400 for the parameters that failed, if any."""
        if self._errors:
            raise validation_error(self._errors)
