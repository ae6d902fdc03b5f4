"""Where an engine output lands in the HTTP hub: per-request streams and the waker they share.

The engine-I/O thread demultiplexes each ``EngineCoreOutputs`` batch by request id and hands the
pieces to the HTTP hub (``handoff``); there ``RequestStream.deliver`` queues the output and
wakes the one greenlet that writes that HTTP response. Several streams (n > 1, prompt lists) can
share one ``Waker`` so a response waits on one event. A response whose greenlet is parked for
the direct write (``streaming/body.py``) is not woken: its waker joins the hub's pass, which
runs once the hub has drained every step that had arrived and writes each touched response once.

Runs on: created in a pool thread (or the HTTP hub); delivered to and consumed in the HTTP hub.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable

import gevent.event
import msgspec

from base.errors import ApiError
from engine.protocol import EngineCoreOutput, FinishReason

log = logging.getLogger("greenfront.stream")


class Waker:
    """One hub-local event shared by the streams of one HTTP response.

    The event is made lazily, inside the HTTP hub, on first use: gevent events belong to the hub
    that first waits on them.

    ``direct``: while set (a response whose greenlet is parked, ``streaming/body.py``) a wake
    does not set the event: it queues this waker for the one pass the hub makes over every
    response touched by the steps it drained (``_write_ready``), which calls ``direct``; the pass
    calls ``hand_back`` when the response's greenlet must take over. Owned by the HTTP hub: set
    by the parked greenlet, cleared by ``hand_back``, both in the hub's thread.
    """

    __slots__ = ("_event", "direct", "_queued")

    def __init__(self) -> None:
        self._event: gevent.event.Event | None = None
        self.direct: Callable[[], None] | None = None
        self._queued = False

    def _get(self) -> gevent.event.Event:
        if self._event is None:
            self._event = gevent.event.Event()
        return self._event

    def wake(self) -> None:
        if self.direct is not None:
            if not self._queued:
                self._queued = True
                _READY.append(self)
                if not _PASS.scheduled:
                    _PASS.scheduled = True
                    gevent.get_hub().loop.run_callback(_write_ready)
            return
        # PERF: inlined _get: called once per output per stream (171 -> 82 ns in a loop).
        event = self._event
        if event is None:
            event = self._event = gevent.event.Event()
        event.set()

    def is_set(self) -> bool:
        """True if a wake is pending (the next ``wait`` returns at once)."""
        return self._event is not None and self._event.is_set()

    def hand_back(self) -> None:
        """HTTP hub: leave direct mode and wake the response's greenlet."""
        self.direct = None
        self._get().set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block this greenlet until woken (or timeout); re-arms for the next wait."""
        event = self._get()
        woken = event.wait(timeout)
        event.clear()
        return bool(woken)


#: Wakers in direct mode woken since the hub's last pass, in wake order. Owned by the HTTP hub
#: (the only thread that delivers outputs and so wakes).
_READY: deque[Waker] = deque()

#: Responses written per slice of a pass: the rest waits for the next turn of the hub's loop,
#: so that accepting, reading requests and /health get theirs between slices (a pass over 1,024
#: responses in one go held the loop for tens of ms: /health p99.9 29 -> 120-140 ms). The
#: responses still queued meanwhile take the steps that keep arriving in the same write.
#: PERF: 32, not 64: one worker, 1,024 streams, two rounds each (bench/RESULTS.md §6.2.2):
#: /health p99.9 34-35 against 41-46 ms, same CPU per token.
PASS_SLICE = 32


class _PassState:
    """Whether a slice of the pass is scheduled. Owned by the HTTP hub."""

    __slots__ = ("scheduled",)

    def __init__(self) -> None:
        self.scheduled = False


_PASS = _PassState()


def _write_ready() -> None:
    """HTTP hub, a loop callback scheduled by the first direct wake: once the hub has drained
    every engine step that had arrived (several merge per stream), one pass over the responses
    they touched, ``PASS_SLICE`` at a time."""
    ready = _READY
    for _ in range(min(len(ready), PASS_SLICE)):
        waker = ready.popleft()
        waker._queued = False
        direct = waker.direct
        if direct is not None:
            try:
                direct()
            except Exception:  # the pass keeps its own errors; this is a bug, not the client's
                log.exception("direct write failed")
                waker.hand_back()
    if ready:
        # a zero timer runs after the loop polled its sockets (a callback would run first)
        gevent.get_hub().loop.timer(0.0).start(_write_ready)
    else:
        _PASS.scheduled = False


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
                 "prefill_tokens", "_tokens_seen", "_version", "_outputs", "_waker", "_abort",
                 "_run_first", "_run_frames", "_run_ids", "_run_last")

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
        #: the last span's version (``weight_versions[-1][0]``), None before any
        self._version: str | None = None
        #: closed runs and outputs that cannot merge, in arrival order
        self._outputs: deque[Any] = deque()
        self._waker = waker
        self._abort = abort
        #: the open run of plain outputs not taken yet: its first output (None: no run) and
        #: that output's frames, the run's token ids once a second output joined it (None
        #: before), and its last output
        self._run_first: Any = None
        self._run_frames: list | None = None
        self._run_ids: list[int] | None = None
        self._run_last: Any = None

    # -- HTTP hub: called by the engine client's dispatch ------------------------------------
    def deliver(self, output: Any, frames: list | None = None,
                weight_version: str | None = None) -> None:
        """Queue one output; ``frames`` are the message's aux frames when it has any (logprob
        arrays of 256 bytes or more travel in their own ZMQ frames); ``weight_version`` is the
        step message's."""
        new_tokens = len(output.new_token_ids)
        if new_tokens:
            if weight_version != self._version and weight_version is not None:
                self._version = weight_version
                self.weight_versions.append((weight_version, self._tokens_seen))
            self._tokens_seen += new_tokens
        # A response that does not keep up with its engine (its client reads slowly, the hub
        # is busy) writes one chunk for all the steps it missed, as vLLM's output collector
        # merges the deltas its consumer has not taken: a plain output (tokens and a finish,
        # nothing else) joins the open run here, at O(1), and ``take`` hands the run over as
        # one output. The run keeps the first step's prefill stats and the last step's finish
        # and stop reasons; an output with prefill stats starts a new run.
        # PERF: merging at once instead of queueing every output and merging the queue on each
        # take (and every 64 outputs): the merge and its checks were 22% of the HTTP hub's GIL
        # samples at 1,024 streams in one worker (py-spy --gil), this path ~1/3 of that.
        # PERF: the version, the run and its parts are slots of this object, not a list of
        # spans and a tuple to look into: in a worker under 1,024 streams each object a
        # delivery touches is a cache miss (bench/RESULTS.md §6.2.3).
        if _plain(output):
            if self._run_first is not None and output.prefill_stats is None:
                ids = self._run_ids
                if ids is None:
                    ids = self._run_ids = list(self._run_first.new_token_ids)
                ids.extend(output.new_token_ids)
            else:
                if self._run_first is not None:
                    self._close_run()
                self._run_first = output
                self._run_frames = frames
            self._run_last = output
        else:
            if self._run_first is not None:
                self._close_run()
            self._outputs.append((output, frames))
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
        """Every (output, frames) pair that arrived since the last call, each run of plain
        outputs merged into one."""
        if self._run_first is not None:
            self._close_run()
        outputs = self._outputs
        if not outputs:
            return []
        taken = list(outputs)
        outputs.clear()
        return taken

    def _close_run(self) -> None:
        first, ids, last = self._run_first, self._run_ids, self._run_last
        if ids is None:
            self._outputs.append((first, self._run_frames))  # one output, untouched
        else:
            self._outputs.append((msgspec.structs.replace(
                first, new_token_ids=ids, finish_reason=last.finish_reason,
                stop_reason=last.stop_reason), None))
        self._run_first = self._run_frames = self._run_ids = self._run_last = None

    def abort(self) -> None:
        """Stop the engine working on this request (idempotent; no-op once finished)."""
        if not self.finished:
            self.finished = True
            self._abort([self.request_id])


def deliver_all(batch: list[tuple[RequestStream, Any, list | None]],
                weight_version: str | None = None) -> None:
    """HTTP hub: each (stream, output, aux frames) of one engine step to its stream."""
    for stream, output, frames in batch:
        stream.deliver(output, frames, weight_version)


def end_aborted(streams: list[RequestStream]) -> None:
    """HTTP hub: end requests aborted by name with a last output of no tokens and finish reason
    ``abort``, which vLLM's output processor makes up for them (the engine sends nothing)."""
    for stream in streams:
        stream.deliver(EngineCoreOutput(request_id=stream.request_id, new_token_ids=[],
                                        finish_reason=FinishReason.ABORT))


def fail_all(streams: list[RequestStream], error: ApiError) -> None:
    """HTTP hub: end every one of ``streams`` with ``error``."""
    for stream in streams:
        stream.fail(error)


def _plain(output: Any) -> bool:
    """Nothing but tokens and a finish: no field a step output may carry beyond them (an
    output that carries any is never merged).

    PERF: one chained expression, ~0.4 us; a generator of 13 getattr calls was ~1.5 us, once
    per output per stream. ``error`` (0.33's) is read apart: the 0.32-shaped struct has none."""
    o = output
    return (o.new_logprobs is None and o.new_prompt_logprobs_tensors is None
            and o.pooling_output is None and o.events is None and o.kv_transfer_params is None
            and o.ec_transfer_params is None and o.trace_headers is None
            and o.routed_experts is None and not o.num_nans_in_logits
            and o.mm_cache_miss_hashes is None and o.new_sampling_mask is None
            and o.spec_decode_metrics is None and o.prompt_token_id_logprobs is None
            and getattr(o, "error", None) is None)
