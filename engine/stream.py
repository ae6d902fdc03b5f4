"""Where an engine output lands in the HTTP hub: per-request streams and the waker they share.

The engine-I/O thread demultiplexes each ``EngineCoreOutputs`` batch by request id and hands the
pieces to the HTTP hub (``handoff``); there ``RequestStream.deliver`` queues the output and
wakes the one greenlet that writes that HTTP response. Several streams (n > 1, prompt lists) can
share one ``Waker`` so a response waits on one event.

Runs on: created in a pool thread (or the HTTP hub); delivered to and consumed in the HTTP hub.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable

import gevent.event
import msgspec

from errors import ApiError


class Waker:
    """One hub-local event shared by the streams of one HTTP response.

    The event is made lazily, inside the HTTP hub, on first use: gevent events belong to the hub
    that first waits on them.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: gevent.event.Event | None = None

    def _get(self) -> gevent.event.Event:
        if self._event is None:
            self._event = gevent.event.Event()
        return self._event

    def wake(self) -> None:
        self._get().set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block this greenlet until woken (or timeout); re-arms for the next wait."""
        event = self._get()
        woken = event.wait(timeout)
        event.clear()
        return bool(woken)


class RequestStream:
    """The outputs of one engine request, in arrival order.

    Attributes:
        request_id: the internal (engine) request id.
        engine_rank: the DP rank the request was sent to (set by the engine-I/O thread when it
            registers the request, before any output can arrive; -1 until then).
        finished: True once an output with a finish reason, or an error, was delivered.
        error: the ApiError that ended the stream early (engine death, send failure), if any.
        weight_versions: ``(version, first output token index)`` each time the engines' weight
            version changed between steps that brought tokens (vLLM's output weight-version
            spans; /inference/v1/generate reports them).
        timing: the ``RequestTiming`` the engine-I/O thread fills for the metrics, or None.
        prefill_tokens: the prompt's tokens until its first output (``engine.admission``).
    """

    __slots__ = ("request_id", "engine_rank", "finished", "error", "weight_versions", "timing",
                 "prefill_tokens", "_tokens_seen", "_outputs", "_waker", "_abort", "_merge_at")

    def __init__(self, request_id: str, engine_rank: int, waker: Waker,
                 abort: Callable[[list[str]], None]) -> None:
        self.request_id = request_id
        self.engine_rank = engine_rank
        self.finished = False
        self.error: ApiError | None = None
        self.weight_versions: list[tuple[str, int]] = []
        #: The request's metric timing (``engine.request_stats``), when metrics are recorded.
        self.timing: Any = None
        #: Prompt tokens while no output arrived (the engine-I/O thread's admission count).
        self.prefill_tokens = 0
        self._tokens_seen = 0
        self._outputs: deque[Any] = deque()
        self._waker = waker
        self._abort = abort
        self._merge_at = _MERGE_AT

    # -- HTTP hub: called by the engine client's dispatch ------------------------------------
    def deliver(self, output: Any, frames: list | None = None,
                weight_version: str | None = None) -> None:
        """Queue one output; ``frames`` are the message's aux frames when it has any (logprob
        arrays of 256 bytes or more travel in their own ZMQ frames); ``weight_version`` is the
        step message's."""
        new_tokens = len(output.new_token_ids)
        if new_tokens:
            spans = self.weight_versions
            if weight_version is not None and (not spans or spans[-1][0] != weight_version):
                spans.append((weight_version, self._tokens_seen))
            self._tokens_seen += new_tokens
        outputs = self._outputs
        outputs.append((output, frames))
        if len(outputs) >= self._merge_at:
            # A response that does not take its outputs (its client reads nothing, its write
            # blocks) keeps one merged output per run of plain steps, not one per step; the
            # next merge waits until the queue doubled, so outputs that cannot merge cost
            # amortized O(1).
            merged = _coalesce(list(outputs))
            outputs.clear()
            outputs.extend(merged)
            self._merge_at = max(_MERGE_AT, 2 * len(merged))
        if output.finish_reason is not None:
            self.finished = True
        self._waker.wake()

    def fail(self, error: ApiError) -> None:
        if not self.finished:
            self.error = error
            self.finished = True
            self._waker.wake()

    # -- HTTP hub: the response writer ----------------------------------------------------------
    def take(self) -> list[tuple[Any, list | None]]:
        """Every (output, frames) pair that arrived since the last call."""
        outputs = self._outputs
        if not outputs:
            return []
        taken = list(outputs)
        outputs.clear()
        return _coalesce(taken) if len(taken) > 1 else taken

    def abort(self) -> None:
        """Stop the engine working on this request (idempotent; no-op once finished)."""
        if not self.finished:
            self.finished = True
            self._abort([self.request_id])


#: Queued outputs of one stream at which runs of plain ones are merged (see ``deliver``).
_MERGE_AT = 64

#: Fields a step output may carry beyond its tokens; one that carries any is never merged.
_EXTRAS = ("new_logprobs", "new_prompt_logprobs_tensors", "pooling_output", "events",
           "kv_transfer_params", "ec_transfer_params", "trace_headers", "routed_experts",
           "mm_cache_miss_hashes", "new_sampling_mask", "spec_decode_metrics",
           "prompt_token_id_logprobs", "error")


def deliver_all(batch: list[tuple[RequestStream, Any, list | None]],
                weight_version: str | None = None) -> None:
    """HTTP hub: each (stream, output, aux frames) of one engine step to its stream."""
    for stream, output, frames in batch:
        stream.deliver(output, frames, weight_version)


def fail_all(streams: list[RequestStream], error: ApiError) -> None:
    """HTTP hub: end every one of ``streams`` with ``error``."""
    for stream in streams:
        stream.fail(error)


def _plain(output: Any) -> bool:
    return not output.num_nans_in_logits and all(
        getattr(output, name, None) is None for name in _EXTRAS)


def _coalesce(taken: list[tuple[Any, list | None]]) -> list[tuple[Any, list | None]]:
    """Merge runs of plain outputs (tokens and a finish, nothing else) into one output.

    A response that fell behind its engine (a busy hub) then renders one chunk for all the steps
    it missed instead of one per step, as vLLM's output collector merges deltas its consumer has
    not taken yet. The merged output is what the steps say together: every token, the first
    step's prefill stats, the last step's finish and stop reasons.
    """
    merged: list[tuple[Any, list | None]] = []
    run: list[tuple[Any, list | None]] = []

    def flush() -> None:
        if len(run) == 1:
            merged.append(run[0])
        elif run:
            first, last = run[0][0], run[-1][0]
            ids = [token for output, _ in run for token in output.new_token_ids]
            merged.append((msgspec.structs.replace(
                first, new_token_ids=ids, finish_reason=last.finish_reason,
                stop_reason=last.stop_reason), None))
        run.clear()

    for item in taken:
        output = item[0]
        if not _plain(output):
            flush()
            merged.append(item)
            continue
        if run and output.prefill_stats is not None:
            flush()
        run.append(item)
    flush()
    return merged
