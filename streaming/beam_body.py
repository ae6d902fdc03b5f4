"""The body of a beam-search request: runs the search against the engines, then renders once.

vLLM 0.32 runs beam search in its frontend (``streaming.beam_search`` has the bookkeeping):
each step sends every live beam of every prompt as its own one-token engine request (its whole
token sequence as the prompt; prefix caching makes that cheap in the engine), all of a step's
requests at once, waits for all of them, and extends the beams. The answer is rendered when
every prompt's search is over; there is no stream (vLLM refuses streamed beam search).

Like ``streaming.body.DeferredBody`` it is resolved by the offload driver (``resolve``): the
search lives in the HTTP hub, which is where engine outputs land and engine requests may be
submitted from. Nothing is left in the engines: a client that goes away, an engine failure or
a failed submit aborts every request of the current step.

Runs on: the HTTP hub (one greenlet per request owns the whole search; no shared state).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable

from base.errors import ApiError, engine_request_error, in_envelope
from engine.admission import Group
from engine.client import EngineClient
from engine.protocol import (EngineCoreRequest, FinishReason, LoRARequest, SamplingParams,
                             logprobs_lists_to_python)
from engine.stream import RequestStream, Waker
from runtime.cancellation import Cancellation
from streaming.beam_search import BeamSearch, Position
from streaming.error_response import http_parts, status_line

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


class BeamSearchBody:
    """A non-streamed beam-search answer, resolved in the HTTP hub.

    Args:
        client: the engine client.
        job: the searches and what their engine requests share.
        render: the searches (done) -> the response body (the endpoint's renderer).
        error_envelope: the error envelope of failures (None: OpenAI's).
    """

    def __init__(self, client: EngineClient, job: BeamJob,
                 render: Callable[[list[BeamSearch]], bytes],
                 error_envelope: str | None = None) -> None:
        self._client = client
        self._job = job
        self._render = render
        self._envelope = error_envelope
        #: the running step's streams (aborted on cancel, failure or close)
        self._streams: list[RequestStream] = []
        self._waker = Waker()

    def resolve(self, cancel: Cancellation) -> tuple[str, list[tuple[str, str]], bytes]:
        """HTTP hub: run the search to its end, then status, headers and body."""
        def on_cancel() -> None:
            self._abort_step()
            self._waker.wake()
        cancel.on_cancel(on_cancel)
        try:
            while not cancel.cancelled:
                live = [s for s in self._job.searches if not s.done]
                if not live:
                    break
                self._step(live, cancel)
        except _StepFailed as failed:
            self._abort_step()
            error = failed.error
            return http_parts(error if self._envelope is None
                              else in_envelope(error, self._envelope))
        except BaseException:
            self._abort_step()
            raise
        finally:
            cancel.discard(on_cancel)
        if cancel.cancelled:
            self._abort_step()
            return status_line(499), [], b""
        body = self._render(self._job.searches)
        return status_line(200), [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(body)))], body

    def _step(self, searches: list[BeamSearch], cancel: Cancellation) -> None:
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
                streams.append(client.submit(request, self._waker, group=group))
        except ApiError as exc:
            raise _StepFailed(exc) from None
        positions = self._wait(streams, cancel)
        if positions is None:
            return
        at = 0
        for search in searches:
            count = len(search.live)
            step = positions[at:at + count]
            at += count
            if any(p is _ABORTED for p in step):
                search.abort()
            else:
                search.advance(step)
        self._streams = []

    def _wait(self, streams: list[RequestStream], cancel: Cancellation
              ) -> list[Position | None | object] | None:
        """Each stream's logprob position (``_ABORTED`` for an aborted request), once every
        stream finished; None when the client went away first."""
        found: list[Any] = [None] * len(streams)
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
                if stream.error is not None:
                    raise _StepFailed(stream.error)
            if cancel.cancelled:
                return None
            if pending:
                self._waker.wait()
        return found

    def _abort_step(self) -> None:
        streams, self._streams = self._streams, []
        ids = [s.request_id for s in streams if not s.finished]
        for s in streams:
            s.finished = True
        if ids:
            self._client.abort(ids)

    # A WSGI iterable too, in case a server iterates it directly; the driver calls resolve().
    def __iter__(self) -> Any:
        raise RuntimeError("BeamSearchBody must be resolved by the offload driver")

    def close(self) -> None:
        self._abort_step()


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

