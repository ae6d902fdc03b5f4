"""Turns a ``PreparedRequest`` into engine requests and tracks their streams.

One ``Generation`` per HTTP request: it submits one ``EngineCoreRequest`` per choice (prompt × n,
each with the request's ``lora_request``), all sharing one ``Waker``, and aborts whatever is
unfinished when the response ends early.

Runs on: ``start_generation`` in a pool thread (or the HTTP hub with offload off); the rest in
the HTTP hub.
"""
from __future__ import annotations

import time
from typing import Any

from engine.admission import Group
from engine.client import EngineClient
from engine.protocol import EngineCoreRequest
from engine.stream import RequestStream, Waker
from base.errors import ApiError
from runtime.cancellation import Cancellation
from streaming.prepared import PooledRequest, PreparedRequest


class ClientGone(Exception):
    """The client disconnected before its engine requests were sent."""


class Generation:
    """The engine requests behind one HTTP response (one per choice)."""

    def __init__(self, client: EngineClient, streams: list[RequestStream], waker: Waker) -> None:
        self.client = client
        self.streams = streams
        self.waker = waker

    def collect(self) -> tuple[list[tuple[int, Any, list | None]], ApiError | None]:
        """Every output that arrived, as (choice index, output, aux frames), and the first
        stream error."""
        items: list[tuple[int, Any, list | None]] = []
        error = None
        for index, stream in enumerate(self.streams):
            for output, frames in stream.take():
                items.append((index, output, frames))
            if stream.error is not None and error is None:
                error = stream.error
        return items, error

    @property
    def finished(self) -> bool:
        # PERF: a loop, not all() over a generator: the direct write's pass reads it per chunk.
        for s in self.streams:
            if not s.finished:
                return False
        return True

    def abort(self) -> None:
        """Abort every unfinished engine request (idempotent)."""
        ids = [s.request_id for s in self.streams if not s.finished]
        for s in self.streams:
            s.finished = True
        if ids:
            self.client.abort(ids)


def start_generation(prepared: PreparedRequest | PooledRequest, client: EngineClient,
                     cancel: Cancellation | None = None,
                     data_parallel_rank: int | None = None) -> Generation:
    """Submit every choice of ``prepared``; on any failure nothing is left running."""
    waker = Waker()
    streams: list[RequestStream] = []
    arrival = time.time()
    # The queue limits admit or refuse the request's engine requests together (n counts n).
    group = Group(len(prepared.choices),
                  sum(len(c.prompt_token_ids) for c in prepared.choices))
    try:
        for choice in prepared.choices:
            if cancel is not None and cancel.cancelled:
                raise ClientGone()
            base = choice.external_req_id
            request = EngineCoreRequest(
                request_id=client.new_request_id(base),
                prompt_token_ids=choice.prompt_token_ids,
                mm_features=None,
                # A pooling request (docs/pooling.md §3) has pooling params instead.
                sampling_params=getattr(choice, "sampling_params", None),
                pooling_params=getattr(choice, "pooling_params", None),
                arrival_time=arrival,
                lora_request=prepared.lora_request,
                cache_salt=prepared.cache_salt,
                data_parallel_rank=data_parallel_rank,
                client_index=client.client_index,
                priority=prepared.priority,
                session_id=prepared.session_id,
                external_req_id=base,
                reasoning_ended=prepared.reasoning_ended,
                reasoning_parser_kwargs=prepared.reasoning_parser_kwargs,
            )
            streams.append(client.submit(request, waker, group=group))
    except BaseException:
        if streams:
            client.abort([s.request_id for s in streams])
        raise
    return Generation(client, streams, waker)
