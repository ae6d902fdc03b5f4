"""The shared shape of the two generation endpoints' Falcon resources.

parse → prepare (validate, render, tokenize) → submit to the engines → a body: a stream for
``stream: true``, else a deferred JSON body that the offload driver resolves in the HTTP hub.

Runs on: a request-pool thread (the HTTP hub with GREENFRONT_OFFLOAD=0).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import falcon

from resources.request_body import read_json
from base.errors import ApiError, InvalidRequest, in_envelope
from resources.common.beam import beam_state
from streaming.output import RequestState
from streaming.sse import error_event
from resources.request_headers import apply_request_headers
from runtime.cancellation import CANCEL_KEY, Cancellation
from runtime.state import WorkerState
from streaming.beam_body import BeamJob, BeamSearchBody, BeamSearchStream
from streaming.beam_search import BeamSearch
from streaming.body import DeferredBody, StreamingBody
from streaming.submit import ClientGone, start_generation

SSE = "text/event-stream; charset=utf-8"

log = logging.getLogger("greenfront.requests")


class GenerationResource:
    """Base of /v1/completions and /v1/chat/completions; subclasses name their functions."""

    #: prepare(body, ctx, header_request_id=...) -> PreparedRequest
    prepare: Callable[..., Any]
    #: renderer class for streams: (prepared, ctx) -> object with chunk/final_chunks
    stream_renderer: Callable[..., Any]
    #: (prepared, state) -> bytes for non-streamed bodies
    render_response: Callable[..., bytes]
    #: (prepared, ctx, generation) -> the per-request output state (the generation's streams
    #: carry what some endpoints report besides the outputs, e.g. weight versions)
    #: True: vLLM's OpenAI rules for X-Vllm-Priority and X-Session-ID (``request_headers``);
    #: False: /inference/v1/generate's (the session header only).
    openai_headers: bool = True
    #: The error envelope of everything after the body was parsed (None: OpenAI's; /v1/messages
    #: answers its handler's errors in Anthropic's) and the stream's error event.
    error_envelope: str | None = None
    stream_error_event: Callable[..., bytes] = staticmethod(error_event)
    #: ``--sse-keep-alive-interval`` applies (vLLM: chat and completions streams only)
    sse_keep_alive: bool = False
    output_state: Callable[..., Any] = staticmethod(
        lambda prepared, ctx, generation: RequestState(prepared, ctx))

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req)
        try:
            self._start(req, resp, body)
        except ApiError as exc:
            if self.error_envelope is not None:
                in_envelope(exc, self.error_envelope)
            raise

    def _start(self, req: falcon.Request, resp: falcon.Response, body: Any) -> None:
        state = self._state
        ctx = state.serving_context()
        prepared = self.prepare_request(body, ctx, req)
        apply_request_headers(prepared, req, body, from_body=type(self).openai_headers)
        if state.config.log_requests:
            _log_request(prepared)
        cancel = req.env.get(CANCEL_KEY) or Cancellation()
        if prepared.beam is not None:
            self._start_beam_search(resp, prepared, ctx, cancel)
            return
        try:
            generation = start_generation(prepared, state.client, cancel,
                                          data_parallel_rank=_dp_rank(req))
        except ClientGone:
            resp.status = 499
            resp.data = b""
            return
        output_state = type(self).output_state(prepared, ctx, generation)
        output_state.timings = [stream.timing for stream in generation.streams]
        metrics = state.metrics

        def on_finished(output_state: RequestState) -> None:  # HTTP hub
            metrics.record_finished(prepared, generation.streams, output_state.choices)
        if prepared.stream:
            renderer = type(self).stream_renderer(prepared, ctx)
            resp.content_type = SSE
            keep_alive = state.config.sse_keep_alive_interval if self.sse_keep_alive else 0
            resp.stream = StreamingBody(generation, output_state, renderer, cancel,
                                        type(self).stream_error_event, on_finished,
                                        self.error_envelope, keep_alive)
        else:
            render = type(self).render_response
            resp.content_type = falcon.MEDIA_JSON
            resp.stream = DeferredBody(generation, output_state,
                                       lambda st: render(prepared, st), on_finished,
                                       self.error_envelope)

    def _start_beam_search(self, resp: falcon.Response, prepared: Any, ctx: Any,
                           cancel: Cancellation) -> None:
        """A beam-search request: the search runs when the offload driver resolves the body or
        gunicorn iterates the stream (``streaming.beam_body``), then the endpoint's renderer
        writes the answer (a stream: every chunk at once, as vLLM sends it)."""
        plan = prepared.beam
        state = self._state
        job = BeamJob(request_id=prepared.request_id,
                      searches=[BeamSearch(c.prompt_token_ids, settings)
                                for c, settings in zip(prepared.choices, plan.settings)],
                      sampling_params=plan.step_params, lora_request=prepared.lora_request,
                      cache_salt=prepared.cache_salt, session_id=prepared.session_id)
        record = state.metrics.record_engine_request
        if prepared.stream:
            renderer = type(self).stream_renderer(prepared, ctx)
            resp.content_type = SSE
            keep_alive = state.config.sse_keep_alive_interval if self.sse_keep_alive else 0
            resp.stream = BeamSearchStream(
                state.client, job,
                lambda searches: renderer.finished_frames(beam_state(prepared, ctx, searches)),
                cancel, type(self).stream_error_event, self.error_envelope, keep_alive, record)
            return
        render = type(self).render_response
        resp.content_type = falcon.MEDIA_JSON
        resp.stream = BeamSearchBody(
            state.client, job,
            lambda searches: render(prepared, beam_state(prepared, ctx, searches)),
            self.error_envelope, record)

    def prepare_request(self, body: Any, ctx: Any, req: falcon.Request) -> Any:
        """The prepared request; an endpoint that needs more than ``prepare`` takes (the
        Responses store) overrides this."""
        return type(self).prepare(body, ctx, header_request_id=req.get_header("X-Request-Id"))


def _log_request(prepared: Any) -> None:
    """--enable-log-requests: one line per engine request, as vLLM logs them."""
    for choice in prepared.choices:
        log.info("Received request %s: prompt_token_ids=%d tokens, params: %s, lora_request: %s.",
                 choice.external_req_id, len(choice.prompt_token_ids), choice.sampling_params,
                 prepared.lora_request)


def _dp_rank(req: falcon.Request) -> int | None:
    raw = req.get_header("X-data-parallel-rank")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidRequest(f"X-data-parallel-rank must be an integer, got {raw!r}.",
                             param="X-data-parallel-rank") from None
