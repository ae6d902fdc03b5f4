"""``vllm.Inference/Generate`` and ``/GenerateStream`` (and their pre-0.27 names under
``vllm.Generate``).

The conversion and submission run in the request pool, exactly as an offloaded HTTP generation
does (``runtime.request_pool``; the call's ``Cancellation`` skips the work of a call already
gone); the outputs come back through the streaming path's pump (``streaming.body``) in the HTTP
hub, one ``GenerateResponse`` per engine step of a sequence, after a first message that carries
only ``prompt_info``. A call that is cancelled, reset, loses its connection or passes its
deadline aborts its engine requests.

Runs on: the HTTP hub; ``_submit`` on a request-pool thread.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

from base.errors import ApiError
from rpc.call import Call, StreamGone
from rpc.dispatch import Method
from rpc.inference.convert import prepare, request_id_of
from rpc.inference.output import (GrpcOutputState, aborted_deltas, prompt_info,
                                  sequence_output)
from rpc.proto import inference_pb2 as pb
from rpc.status import Code, RpcError
from runtime.lora_registry import lora_registry
from runtime.request_pool import LIGHT_BODY_BYTES, RequestPool, Skipped
from runtime.serving_context import ServingContext
from runtime.shutdown import Drain
from runtime.state import WorkerState
from streaming.body import Pump
from streaming.submit import ClientGone, Generation, start_generation

_DP_RANK = "x-data-parallel-rank"


class InferenceService:
    """The two generation RPCs of one worker."""

    def __init__(self, state: WorkerState, pool: Callable[[], RequestPool],
                 drain: Drain | None = None) -> None:
        self._state = state
        self._pool = pool
        self._drain = drain or Drain(0.0)
        self._live: dict[str, set[Live]] = {}

    def methods(self) -> dict[str, Method]:
        out = {}
        for service in ("vllm.Inference", "vllm.Generate"):
            out[f"/{service}/Generate"] = Method(pb.GenerateRequest, self.generate)
            out[f"/{service}/GenerateStream"] = Method(pb.GenerateRequest, self.generate_stream,
                                                       streaming=True)
        return out

    def generate(self, call: Call, request: pb.GenerateRequest) -> pb.GenerateResponse:
        self._drain.enter()  # the drain waits for this call as for an HTTP request
        try:
            return self._generate(call, request)
        finally:
            self._drain.leave()

    def _generate(self, call: Call, request: pb.GenerateRequest) -> pb.GenerateResponse:
        live = self._start(call, request, stream=False)
        output = live.output
        response = pb.GenerateResponse()
        text: list[str] = []
        seq = response.outputs
        options = request.response
        try:
            for delta in _deltas(live, call):
                piece = sequence_output(delta, output, options)
                text.append(piece.text)
                piece.text = ""
                seq.MergeFrom(piece)  # repeated fields append; finish_info set at the end
        finally:
            self._end(live)
        seq.text = "".join(text)
        seq.num_tokens = output.choices[0].num_output_tokens
        response.prompt_info.CopyFrom(prompt_info(output, options))
        return response

    def generate_stream(self, call: Call, request: pb.GenerateRequest
                        ) -> Iterator[pb.GenerateResponse]:
        self._drain.enter()
        try:
            live = self._start(call, request, stream=True)
        except BaseException:
            self._drain.leave()
            raise

        def cleanup() -> None:
            self._end(live)
            self._drain.leave()
        return Streamed(_stream(call, request.response, live), cleanup)

    def abort(self, request_ids: list[str]) -> None:
        """``Control.Abort``: this worker's live calls with these ids end with ABORTED."""
        for request_id in request_ids:
            for live in list(self._live.get(request_id, ())):
                live.aborted = True
                live.pump.generation.abort()
                live.pump.generation.waker.wake()

    def _end(self, live: "Live") -> None:
        live.pump.generation.abort()
        calls = self._live.get(live.request_id)
        if calls is not None:
            calls.discard(live)
            if not calls:
                del self._live[live.request_id]

    def _context(self, request: pb.GenerateRequest) -> tuple[ServingContext, bool]:
        """The serving context, with the deployment's adapters when the engines take LoRA
        (``Control.LoadLora`` adds them), and whether they do."""
        state = self._state
        ctx = state.serving_context()
        client = state.client
        lora = all(client.registrations[r].supports_lora for r in client.ranks)
        if lora and ctx.adapters is None and request.lora_name:
            ctx = dataclasses.replace(ctx, adapters=lora_registry(state.config))
        return ctx, lora

    def _start(self, call: Call, request: pb.GenerateRequest, stream: bool) -> "Live":
        state = self._state
        state.ensure_started()
        ctx, lora = self._context(request)
        request_id = request_id_of(request)
        rank = _dp_rank(call)

        def submit() -> tuple[Any, Generation]:  # a request-pool thread
            prepared = prepare(request, ctx, request_id=request_id, stream=stream,
                               lora_enabled=lora)
            return prepared, start_generation(prepared, state.client, call.cancel,
                                              data_parallel_rank=rank)
        try:
            prepared, generation = self._pool().apply(
                submit, (), cancelled=lambda: call.cancel.cancelled,
                light=request.ByteSize() <= LIGHT_BODY_BYTES)
        except (Skipped, ClientGone):
            raise StreamGone() from None
        output = GrpcOutputState(prepared, ctx, generation)
        metrics = state.metrics

        def on_finished(finished: GrpcOutputState) -> None:
            metrics.record_finished(prepared, generation.streams, finished.choices)
        pump = Pump(generation, output, call.cancel, on_finished)

        def on_cancel() -> None:
            generation.abort()
            generation.waker.wake()
        call.cancel.on_cancel(on_cancel)
        live = Live(request_id, output, pump)
        self._live.setdefault(request_id, set()).add(live)
        return live


class Live:
    """One call's generation while it runs (what ``Control.Abort`` finds by request id)."""

    __slots__ = ("request_id", "output", "pump", "aborted")

    def __init__(self, request_id: str, output: GrpcOutputState, pump: Pump) -> None:
        self.request_id = request_id
        self.output = output
        self.pump = pump
        self.aborted = False


def _deltas(live: Live, call: Call) -> Iterator[Any]:
    """Every delta of the generation, in order, then an ABORTED end for each sequence an Abort
    cut short; raises the pump's error."""
    deltas: list[Any] = []
    pump, state = live.pump, live.output
    while not state.all_finished and pump.step(lambda index, delta: deltas.append(delta)):
        yield from deltas
        deltas.clear()
    yield from deltas
    if pump.error is not None:
        raise pump.error
    if live.aborted:
        yield from aborted_deltas(state)
    elif call.cancel.cancelled and not state.all_finished:
        raise StreamGone()


class Streamed:
    """A stream's messages and what must happen once it is over, however it ends (closed before
    its first message too, which a generator's ``finally`` would miss)."""

    def __init__(self, messages: Iterator[Any], cleanup: Callable[[], None]) -> None:
        self._messages = messages
        self._cleanup: Callable[[], None] | None = cleanup

    def __iter__(self) -> Iterator[Any]:
        return self._messages

    def close(self) -> None:
        close = getattr(self._messages, "close", None)
        if close is not None:
            close()
        cleanup, self._cleanup = self._cleanup, None
        if cleanup is not None:
            cleanup()


def _stream(call: Call, options: pb.ResponseOptions, live: Live
            ) -> Iterator[pb.GenerateResponse]:
    output = live.output
    try:
        started = False
        for delta in _deltas(live, call):
            if not started:
                started = True
                yield pb.GenerateResponse(prompt_info=prompt_info(output, options))
            yield pb.GenerateResponse(outputs=sequence_output(delta, output, options))
    except ApiError as error:
        if error.status == 500:
            raise RpcError(Code.INTERNAL, "engine failed during generation") from None
        raise


def _dp_rank(call: Call) -> int | None:
    raw = call.metadata.get(_DP_RANK)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if not 0 <= value < 1 << 32:
        raise RpcError(Code.INVALID_ARGUMENT,
                       "x-data-parallel-rank metadata must be an unsigned 32-bit integer")
    return value
