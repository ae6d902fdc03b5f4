"""The HTTP bodies of a generation: an SSE stream, or one deferred JSON document.

Both take every output that arrived since they last looked (coalescing: one write per wake-up,
not one per token, docs/architecture.md §5.5), feed it to the request's output state (incremental
detokenization, stop strings) and render it. A stop string that ends a choice early aborts its
engine request; a body closed early (client gone) aborts whatever is still running.

The direct write (docs/architecture.md §3.1): a one-choice OpenAI chunk stream (completions,
chat) without SSE keep-alive whose server offers it (``write_direct``: HTTP/1.1 chunked on a
plain socket, ``middleware/slow_clients.py``) sends its first chunk through gunicorn, then parks
its greenlet: the hub's pass after each drain (``engine/stream.py``) applies, renders and writes
its chunks straight to the socket without blocking. The greenlet takes over again for what the
pass cannot finish without blocking or may not do: the bytes a full socket did not take, the
last chunks, an error, a cancellation. Only one of them writes at a time: the greenlet writes
only while not parked, the pass only while ``Waker.direct`` is set (the parked state).

Runs on: the HTTP hub (gunicorn iterates the stream; the offload driver resolves deferred bodies;
the direct write runs in the hub's pass, as a loop callback).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterator

from base.errors import ApiError, in_envelope
from engine.stream import Waker
from runtime.cancellation import Cancellation
from streaming.error_response import http_parts, status_line
from streaming.output import ChoiceDelta, OutputState
from streaming.stream_renderer import ChunkStreamRenderer, StreamRenderer
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

    @property
    def over(self) -> bool:
        """The generation finished or was aborted, or the client left: no wake is to come."""
        return self.generation.finished or self.cancel.cancelled

    def step(self, on_delta: Callable[[int, ChoiceDelta], None],
             timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for outputs, apply them; False once there is
        nothing more to wait for."""
        generation = self.generation
        items, error = generation.collect()
        self.idle = False
        if not items and error is None:
            if self.over:
                return False
            if not generation.waker.wait(timeout):
                self.idle = True
                return True
            items, error = generation.collect()
        return self.apply(items, error, on_delta)

    def apply(self, items: list[tuple[int, Any, list | None]], error: ApiError | None,
              on_delta: Callable[[int, ChoiceDelta], None]) -> bool:
        """Apply collected outputs (never blocks); False if the generation failed."""
        generation = self.generation
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
        #: rendered chunks not written yet (the greenlet's, or the direct pass's when it hands
        #: back at the end); HTTP hub
        self._frames: list[bytes] = []
        frames = self._frames  # not ``self``: body -> lambda -> body would be a cycle per stream
        self._on_delta = lambda index, delta: frames.append(renderer.chunk(index, delta, state))
        #: the direct write's socket calls (``write_direct``), None: every chunk via gunicorn
        self._send_now: Callable[[bytes], int] | None = None
        self._send_rest: Callable[[bytes], None] | None = None
        #: what the direct pass leaves the greenlet: bytes a full socket did not take, what it
        #: raised (the connection's error, a failure while rendering), and False once the pump
        #: said stop (an error)
        self._rest = b""
        self._raise: BaseException | None = None
        self._pumping = True

    def write_direct(self, send_now: Callable[[bytes], int],
                     send_rest: Callable[[bytes], None]) -> None:
        """Offered by the server for an HTTP/1.1 chunked response on a plain socket:
        ``send_now`` sends without blocking (bytes taken; 0 if the socket is full; OSError if the
        connection broke), ``send_rest`` blocks this greenlet until all is sent (bounded by the
        slow-client watch). Taken only for one choice, no keep-alive, an OpenAI chunk renderer."""
        if (len(self._pump.generation.streams) == 1 and self._keep_alive is None
                and isinstance(self._renderer, ChunkStreamRenderer)):
            self._send_now, self._send_rest = send_now, send_rest

    def _on_cancel(self) -> None:
        self._pump.generation.abort()
        self._pump.generation.waker.wake()

    def __iter__(self) -> Iterator[bytes]:
        pump, renderer, state = self._pump, self._renderer, self._pump.state
        # Registered here, in the hub, so a cancellation wakes this greenlet's hub-local event.
        pump.cancel.on_cancel(self._on_cancel)
        frames = self._frames
        on_delta = self._on_delta
        waker = pump.generation.waker
        started = False
        while not state.all_finished:
            if started and self._send_now is not None and not waker.is_set():
                self._park(waker)
                if not self._pumping or state.all_finished:
                    break
            if not pump.step(on_delta, self._keep_alive):
                break
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

    # -- the direct write (docs/architecture.md §3.1) -------------------------------------------
    def _park(self, waker: Waker) -> None:
        """This greenlet (headers sent, nothing pending) leaves the writing to the hub's pass
        (``_write_step``) until the pass hands back; then it sends what the socket did not take.

        Not once the generation is over (finished or aborted: no wake would come to hand back),
        e.g. the client left and the last outputs taken rendered nothing: the next ``step``
        ends the stream."""
        if self._pump.over:
            return
        waker.direct = self._write_step
        try:
            waker.wait()
        finally:
            waker.direct = None  # already, unless this greenlet was killed
        if self._raise is not None:
            raise self._raise  # here, as from gunicorn's own write or this greenlet's render
        if self._rest:
            rest, self._rest = self._rest, b""
            self._send_rest(rest)

    def _write_step(self) -> None:
        """HTTP hub, in the pass after a drain (never blocks): apply what arrived, render, write
        the chunk to the socket. Hands back to the greenlet for the end (finish, error,
        cancel, a stop string) and when the socket does not take the whole chunk."""
        pump = self._pump
        generation = pump.generation
        waker = generation.waker
        if pump.over:
            waker.hand_back()  # the greenlet collects the last outputs itself
            return
        try:
            items, error = generation.collect()
            self._pumping = pump.apply(items, error, self._on_delta)
            frames = self._frames
            if not self._pumping or pump.state.all_finished:
                waker.hand_back()  # the frames go out with the final chunks or the error
                return
            if not frames:
                return
            data = b"".join(frames)
            frames.clear()
            if not data:
                return  # an empty chunk would end the HTTP response
            chunk = b"%X\r\n%s\r\n" % (len(data), data)  # gunicorn's chunked framing
            sent = self._send_now(chunk)
        except Exception as exc:  # noqa: BLE001 (raised again in the response's greenlet)
            self._raise = exc
            waker.hand_back()
            return
        if sent < len(chunk):
            self._rest = chunk[sent:]
            waker.hand_back()


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
