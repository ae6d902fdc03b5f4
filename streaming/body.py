"""The HTTP bodies of a generation: an SSE stream, or one deferred JSON document.

Both take every output that arrived since they last looked (coalescing: one write per wake-up,
not one per token, docs/architecture.md §5.5), feed it to the request's output state (incremental
detokenization, stop strings) and render it. A stop string that ends a choice early aborts its
engine request; a body closed early (client gone) aborts whatever is still running.

Runs on: the HTTP hub (gunicorn iterates the stream; the offload driver resolves deferred bodies).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterator

from base.errors import ApiError, in_envelope
from runtime.cancellation import Cancellation
from streaming.error_response import http_parts, status_line
from streaming.output import ChoiceDelta, OutputState
from streaming.stream_renderer import StreamRenderer
from streaming.submit import Generation

log = logging.getLogger("greenfront.body")
#: vLLM's SSE keep-alive comment (``--sse-keep-alive-interval``).
KEEP_ALIVE = b": keep-alive\n\n"


class _Pump:
    """Moves outputs from the generation's streams into the request state."""

    def __init__(self, generation: Generation, state: OutputState, cancel: Cancellation,
                 on_finished: Callable[[Any], None] | None = None,
                 error_envelope: str | None = None) -> None:
        self.generation = generation
        self._envelope = error_envelope
        self.state = state
        self.cancel = cancel
        self.error: ApiError | None = None
        self._on_finished = on_finished
        #: the last ``step`` waited ``timeout`` seconds and nothing came
        self.idle = False

    def step(self, on_delta: Callable[[int, ChoiceDelta], None],
             timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for outputs, apply them; False once there is
        nothing more to wait for."""
        generation = self.generation
        items, error = generation.collect()
        self.idle = False
        if not items and error is None:
            if generation.finished or self.cancel.cancelled:
                return False
            if not generation.waker.wait(timeout):
                self.idle = True
                return True
            items, error = generation.collect()
        for index, output, frames in items:
            try:
                delta = self.state.add(index, output, frames)
            except ApiError as exc:  # a request-level engine failure (finish reason ERROR)
                error = error or exc
                continue
            if delta is None:  # nothing to show yet (stream_interval) or a late output
                continue
            if delta.abort_engine:
                generation.streams[index].abort()
            on_delta(index, delta)
        if error is not None:
            self.error = error if self._envelope is None else in_envelope(error, self._envelope)
            generation.abort()
            return False
        if self._on_finished is not None and self.state.all_finished:
            on_finished, self._on_finished = self._on_finished, None
            on_finished(self.state)
        return True


class StreamingBody:
    """``text/event-stream`` body: chunks as outputs arrive, then usage and ``[DONE]``.

    A failure before the first chunk (a stalled or dead engine) yields nothing and leaves the
    error in ``error_before_start``: the offload driver then answers with its status (503)
    instead of a 200 stream; after the first chunk it is an error event in the stream.
    """

    error_before_start: ApiError | None = None

    def __init__(self, generation: Generation, state: OutputState, renderer: StreamRenderer,
                 cancel: Cancellation, error_event: Callable[[ApiError], bytes],
                 on_finished: Callable[[Any], None] | None = None,
                 error_envelope: str | None = None, keep_alive: float = 0) -> None:
        self._pump = _Pump(generation, state, cancel, on_finished, error_envelope)
        self._renderer = renderer
        self._error_event = error_event
        # --sse-keep-alive-interval: a comment line when no chunk came for this long (0: off).
        self._keep_alive = keep_alive if keep_alive > 0 else None

    def _on_cancel(self) -> None:
        self._pump.generation.abort()
        self._pump.generation.waker.wake()

    def __iter__(self) -> Iterator[bytes]:
        pump, renderer, state = self._pump, self._renderer, self._pump.state
        # Registered here, in the hub, so a cancellation wakes this greenlet's hub-local event.
        pump.cancel.on_cancel(self._on_cancel)
        frames: list[bytes] = []
        on_delta = lambda index, delta: frames.append(renderer.chunk(index, delta, state))  # noqa: E731
        started = False
        while not state.all_finished and pump.step(on_delta, self._keep_alive):
            if frames and not state.all_finished:
                started = True
                yield b"".join(frames)
                frames.clear()
            elif pump.idle:
                started = True  # the 200 goes out with the first keep-alive
                yield KEEP_ALIVE
        if pump.error is not None:
            if not started and not frames:
                self.error_before_start = pump.error
                return
            frames.append(self._error_event(pump.error))
            yield b"".join(frames)
            return
        if pump.cancel.cancelled:
            return
        frames.append(renderer.final_chunks(state))
        yield b"".join(frames)

    def close(self) -> None:
        self._pump.cancel.discard(self._on_cancel)
        self._pump.generation.abort()


class DeferredBody:
    """A non-streamed generation: ``resolve`` waits for every choice, then renders one body."""

    def __init__(self, generation: Generation, state: OutputState,
                 render: Callable[[Any], bytes],
                 on_finished: Callable[[Any], None] | None = None,
                 error_envelope: str | None = None) -> None:
        self._generation = generation
        self._envelope = error_envelope
        self._state = state
        self._render = render
        self._on_finished = on_finished

    def resolve(self, cancel: Cancellation) -> tuple[str, list[tuple[str, str]], bytes]:
        """HTTP hub: status, headers and body once the generation is over (or failed)."""
        generation = self._generation

        def on_cancel() -> None:
            generation.abort()
            generation.waker.wake()
        cancel.on_cancel(on_cancel)
        pump = _Pump(generation, self._state, cancel, self._on_finished, self._envelope)
        try:
            while not self._state.all_finished and pump.step(_ignore):
                pass
        except BaseException:
            generation.abort()
            raise
        finally:
            cancel.discard(on_cancel)
        if pump.error is not None:
            return http_parts(pump.error)
        if cancel.cancelled:
            return status_line(499), [], b""
        body = self._render(self._state)
        return status_line(200), [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(body)))], body

    # A WSGI iterable too, in case a server iterates it directly; the driver calls resolve().
    def __iter__(self) -> Iterator[bytes]:
        raise RuntimeError("DeferredBody must be resolved by the offload driver")

    def close(self) -> None:
        self._generation.abort()


def _ignore(index: int, delta: ChoiceDelta) -> None:
    pass

#: The pump a non-HTTP body (the gRPC services, rpc/inference) drives the same way.
Pump = _Pump
