"""The bodies of a beam-search request: run the search against the engines, then render once.

vLLM 0.32 runs beam search in its frontend (``streaming.beam_search`` has the bookkeeping):
each step sends every live beam of every prompt as its own one-token engine request (its whole
token sequence as the prompt; prefix caching makes that cheap in the engine), all of a step's
requests at once, waits for all of them, and extends the beams. The answer is rendered when
every prompt's search is over: one JSON body (``BeamSearchBody``, resolved by the offload
driver like ``streaming.body.DeferredBody``), or, for a streamed chat completion, the whole
stream at once (``BeamSearchStream``: vLLM feeds the finished beams to its ordinary stream
writer as one output; only ``--sse-keep-alive-interval`` comments come before them).

The search lives in the HTTP hub, which is where engine outputs land and engine requests may be
submitted from. Nothing is left in the engines: a client that goes away, an engine failure or
a failed submit aborts every request of the current step. Each step request that finishes is
counted in the per-request metrics as vLLM's output processor counts it (``record``).

Runs on: the HTTP hub (one greenlet per request owns the whole search; no shared state).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from base.errors import ApiError, engine_request_error, in_envelope
from engine.admission import Group
from engine.client import EngineClient
from engine.protocol import (EngineCoreRequest, FinishReason, LoRARequest, SamplingParams,
                             finish_reason_str, logprobs_lists_to_python)
from engine.stream import RequestStream, Waker
from runtime.cancellation import Cancellation
from runtime.metrics.requests import FinishedRequest
from streaming.beam_search import BeamSearch, Position
from streaming.body import KEEP_ALIVE
from streaming.error_response import http_parts, status_line

#: Counts one finished step request in the per-request metrics (``Metrics.record_engine_request``).
Record = Callable[[FinishedRequest], None]

#: Step-id randomness (ids are not secrets; ``random.Random`` seeds itself from os.urandom).
_ids = random.Random()


@dataclass
class BeamJob:
    """Everything the engine requests of a beam search share.

    Attributes:
        request_id: the base of the engine requests' external ids (vLLM names them
            ``<request id>-<random>-beam-<i>``).
        searches: one search per prompt, in prompt order.
        sampling_params: the step request's parameters (one token, ``2 × width`` logprobs).
        lora_request, cache_salt, session_id: as the prompt's engine requests carry them
            (vLLM sends no priority and no data-parallel rank with beam steps).
    """

    request_id: str
    searches: list[BeamSearch]
    sampling_params: SamplingParams
    lora_request: LoRARequest | None = None
    cache_salt: str | None = None
    session_id: str | None = None


class _StepFailed(Exception):
    """A step ended with an error (``error``) that ends the whole request."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


class _BeamRun:
    """The search loop both bodies drive: steps until every search is done.

    Args:
        client: the engine client.
        job: the searches and what their engine requests share.
        record: counts each finished step request (None: not counted).
    """

    def __init__(self, client: EngineClient, job: BeamJob, record: Record | None) -> None:
        self._client = client
        self._job = job
        self._record = record
        #: the running step's streams (aborted on cancel, failure or close)
        self._streams: list[RequestStream] = []
        self.waker = Waker()
        #: when the next ``run`` tick is due (monotonic seconds)
        self._due = 0.0

    def run(self, cancel: Cancellation, every: float | None = None) -> Iterator[None]:
        """Run the searches to their end (or until ``cancel``); yields every ``every`` seconds
        while it runs (None: never), whatever the engines send: nothing is sent to the client
        before the end, so a keep-alive is due each interval.

        Raises:
            _StepFailed: a submit or a step request failed (the step is aborted first).
        """
        if every is not None:
            self._due = time.monotonic() + every
        try:
            while not cancel.cancelled:
                live = [s for s in self._job.searches if not s.done]
                if not live:
                    break
                yield from self._step(live, cancel, every)
        except BaseException:
            self.abort_step()
            raise
        if cancel.cancelled:
            self.abort_step()

    def _step(self, searches: list[BeamSearch], cancel: Cancellation,
              every: float | None) -> Iterator[None]:
        """One step of every unfinished search: submit, wait for all, advance."""
        job, client = self._job, self._client
        step_id = f"{job.request_id}-{_hex32()}"
        beams = [(search, beam) for search in searches for beam in search.live]
        group = Group(len(beams), sum(len(beam.tokens) for _, beam in beams))
        arrival = time.time()
        self._streams = streams = []
        try:
            for i, (_, beam) in enumerate(beams):
                external = f"{step_id}-beam-{i}"
                request = EngineCoreRequest(
                    request_id=client.new_request_id(external), prompt_token_ids=beam.tokens,
                    mm_features=None, sampling_params=job.sampling_params, pooling_params=None,
                    arrival_time=arrival, lora_request=job.lora_request,
                    cache_salt=job.cache_salt, data_parallel_rank=None,
                    client_index=client.client_index, session_id=job.session_id,
                    external_req_id=external)
                streams.append(client.submit(request, self.waker, group=group))
        except ApiError as exc:
            raise _StepFailed(exc) from None
        found: list[Any] = [None] * len(streams)
        yield from self._wait(streams, [len(beam.tokens) for _, beam in beams], found, cancel,
                              every)
        if cancel.cancelled:
            return
        at = 0
        for search in searches:
            count = len(search.live)
            step = found[at:at + count]
            at += count
            if any(p is _ABORTED for p in step):
                search.abort()
            else:
                search.advance(step)
        self._streams = []

    def _wait(self, streams: list[RequestStream], prompt_lens: list[int], found: list[Any],
              cancel: Cancellation, every: float | None) -> Iterator[None]:
        """Fill ``found`` with each stream's logprob position (``_ABORTED`` for an aborted
        request) until every stream finished or the client went away."""
        pending = set(range(len(streams)))
        while pending:
            for i in list(pending):
                stream = streams[i]
                for output, frames in stream.take():
                    code = output.finish_reason
                    if code == FinishReason.ERROR:
                        raise _StepFailed(engine_request_error(getattr(output, "error", None)))
                    if output.new_logprobs is not None and found[i] is None:
                        found[i] = _position(output.new_logprobs, frames,
                                             self._job.sampling_params.logprobs)
                    if code == FinishReason.ABORT:
                        found[i] = _ABORTED
                    if code is not None:
                        pending.discard(i)
                        self._finished(stream, finish_reason_str(code), prompt_lens[i])
                if stream.error is not None:
                    raise _StepFailed(stream.error)
            if cancel.cancelled:
                return
            if not pending:
                break
            if every is None:
                self.waker.wait()
                continue
            self.waker.wait(max(self._due - time.monotonic(), 0.0))
            if time.monotonic() >= self._due:
                self._due = time.monotonic() + every
                yield

    def _finished(self, stream: RequestStream, reason: str, prompt_len: int) -> None:
        """vLLM's output processor counts every finished engine request, each its own (n 1)."""
        if self._record is not None:
            self._record(FinishedRequest(reason, prompt_len, self._job.sampling_params.max_tokens,
                                         stream.engine_rank, stream.timing))

    def abort_step(self) -> None:
        """Abort the running step's unfinished requests."""
        streams, self._streams = self._streams, []
        ids = [s.request_id for s in streams if not s.finished]
        for s in streams:
            s.finished = True
        if ids:
            self._client.abort(ids)


class BeamSearchBody:
    """A non-streamed beam-search answer, resolved in the HTTP hub.

    Args:
        client: the engine client.
        job: the searches and what their engine requests share.
        render: the searches (done) -> the response body (the endpoint's renderer).
        error_envelope: the error envelope of failures (None: OpenAI's).
        record: counts each finished step request (None: not counted).
    """

    def __init__(self, client: EngineClient, job: BeamJob,
                 render: Callable[[list[BeamSearch]], bytes],
                 error_envelope: str | None = None, record: Record | None = None) -> None:
        self._run = _BeamRun(client, job, record)
        self._job = job
        self._render = render
        self._envelope = error_envelope

    def resolve(self, cancel: Cancellation) -> tuple[str, list[tuple[str, str]], bytes]:
        """HTTP hub: run the search to its end, then status, headers and body."""
        run = self._run

        def on_cancel() -> None:
            run.abort_step()
            run.waker.wake()
        cancel.on_cancel(on_cancel)
        try:
            for _ in run.run(cancel):
                pass
        except _StepFailed as failed:
            return http_parts(_in_envelope(failed.error, self._envelope))
        finally:
            cancel.discard(on_cancel)
        if cancel.cancelled:
            return status_line(499), [], b""
        body = self._render(self._job.searches)
        return status_line(200), [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(body)))], body

    # A WSGI iterable too, in case a server iterates it directly; the driver calls resolve().
    def __iter__(self) -> Any:
        raise RuntimeError("BeamSearchBody must be resolved by the offload driver")

    def close(self) -> None:
        self._run.abort_step()


class BeamSearchStream:
    """A streamed beam-search answer (chat): keep-alive comments while the search runs, then
    every chunk at once (``render``: the endpoint's stream renderer fed the finished beams).

    A failure before anything was sent leaves its error in ``error_before_start`` (the offload
    driver answers with its status, as for ``streaming.body.StreamingBody``); after a keep-alive
    it is the stream's error event.

    Args:
        client, job, record: as ``BeamSearchBody``'s.
        render: the searches (done) -> every frame of the stream, ``[DONE]`` included.
        cancel: the request's cancellation (the client went away).
        error_event: an ``ApiError`` -> its SSE error frames.
        error_envelope: the error envelope of failures (None: OpenAI's).
        keep_alive: a keep-alive comment every this many seconds while the search runs
            (0: none; vLLM sends them while its stream writer waits for the search).
    """

    error_before_start: ApiError | None = None

    def __init__(self, client: EngineClient, job: BeamJob,
                 render: Callable[[list[BeamSearch]], bytes], cancel: Cancellation,
                 error_event: Callable[[ApiError], bytes], error_envelope: str | None = None,
                 keep_alive: float = 0, record: Record | None = None) -> None:
        self._run = _BeamRun(client, job, record)
        self._job = job
        self._render = render
        self._cancel = cancel
        self._error_event = error_event
        self._envelope = error_envelope
        self._keep_alive = keep_alive if keep_alive > 0 else None

    def _on_cancel(self) -> None:
        self._run.abort_step()
        self._run.waker.wake()

    def __iter__(self) -> Iterator[bytes]:
        cancel = self._cancel
        # Registered here, in the hub, so a cancellation wakes this greenlet's hub-local event.
        cancel.on_cancel(self._on_cancel)
        started = False
        try:
            for _ in self._run.run(cancel, self._keep_alive):
                started = True  # the 200 goes out with the first keep-alive
                yield KEEP_ALIVE
        except _StepFailed as failed:
            error = _in_envelope(failed.error, self._envelope)
            if not started:
                self.error_before_start = error
                return
            yield self._error_event(error)
            return
        if cancel.cancelled:
            return
        yield self._render(self._job.searches)

    def close(self) -> None:
        self._cancel.discard(self._on_cancel)
        self._run.abort_step()


def _in_envelope(error: ApiError, envelope: str | None) -> ApiError:
    return error if envelope is None else in_envelope(error, envelope)


#: The position of a step request the engine aborted (every beam of its prompt ends "abort").
_ABORTED = object()


def _position(value: Any, frames: list | None, k: int | None) -> Position | None:
    """The first row of an output's ``new_logprobs`` as ``{token_id: (logprob, rank)}``: the
    sampled token with its rank, then the top ``k`` with ranks 1..k (a token already there
    keeps its slot), as vLLM's per-position dict (the engine may send more columns, sized for
    its batch; vLLM keeps 1 + k)."""
    ids, lps, ranks = logprobs_lists_to_python(value, frames)
    if not ids:
        return None
    row_ids, row_lps = ids[0], lps[0]
    width = len(row_ids) if k is None else min(len(row_ids), k + 1)
    position: Position = {row_ids[0]: (float(row_lps[0]), int(ranks[0]))}
    for j in range(1, width):
        position[row_ids[j]] = (float(row_lps[j]), j)
    return position


def _hex32() -> str:
    """32 random hex digits, like vLLM's ``random_uuid`` in the step ids."""
    return f"{_ids.getrandbits(128):032x}"

