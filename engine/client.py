"""The engine-core client: the one object request code uses to reach the engines.

Thread-safe facade. ``submit``/``abort`` may be called from a pool thread or the HTTP hub; they
register the request's stream and hand the frames to the engine-I/O thread. Outputs come back
through ``runtime.handoff`` into the HTTP hub, where each goes to its ``RequestStream``.
Registration (the engines' ready messages) decides ``ready`` and ``max_model_len``; engine death
(``ENGINE_CORE_DEAD`` or a dropped connection) fails every in-flight request and turns ``dead``.

Runs on: constructed and started in the HTTP hub of a worker; see each method.
"""
from __future__ import annotations

import copy
import itertools
import logging
import os
import random
from typing import Any, Callable

import gevent
import gevent.event
import msgspec

from engine import protocol
from engine.stream import RequestStream, Waker
from engine.transport import Transport
from errors import ApiError, EngineDead, EngineUnavailable, InvalidRequest, ServerError
from runtime.engine_thread import EngineThread
from runtime.handoff import HubInbox, run_each

log = logging.getLogger("greenfront.engine")

#: The random suffix of internal request ids (vLLM's `<external>-<8 hex>`).
_suffixes = random.Random()


class EngineClient:
    """Talks to ``engine_count`` engines (DP ranks ``engine_start``…) over one ROUTER/PULL pair.

    Args:
        input_address / output_address: this client's ZMQ endpoints (or fds to adopt).
        client_index: the index of this client's output socket in the engines' INIT message.
        engine_start / engine_count: the DP ranks this client expects to register.
        registration_dir: where registrations are shared between worker processes, so that a
            restarted worker (the engines register only once per socket) knows them; or "".
    """

    def __init__(self, *, input_address: str, output_address: str, client_index: int,
                 engine_start: int = 0, engine_count: int = 1, io_threads: int = 4,
                 max_model_len_cap: int | None = None, registration_dir: str = "",
                 input_fd: int | None = None, output_fd: int | None = None,
                 coordinator_address: str = "",
                 on_dead: Callable[[str], None] | None = None,
                 on_stats: Callable[[int, Any], None] | None = None) -> None:
        self.client_index = client_index
        self.ranks = list(range(engine_start, engine_start + engine_count))
        self._addresses = (input_address, output_address, input_fd, output_fd)
        self._io_threads = io_threads
        self._cap = max_model_len_cap
        self._registration_dir = registration_dir
        self._on_dead_hook = on_dead
        self._on_stats = on_stats
        self._coordinator_address = coordinator_address
        self.engine_start = engine_start
        # Latest DP coordinator view (§7.2): per-rank [waiting, running, kv_usage] of our ranks,
        # the current wave, and whether the engines are running a wave.
        self._load: dict[int, list] = {}
        self.current_wave = 0
        self.engines_running = True
        self.registrations: dict[int, Any] = {}
        self.ready = False
        self.dead_reason: str | None = None
        self.max_model_len: int | None = None
        #: Set by ``abort_all`` (the worker is shutting down): no new request is sent.
        self.closed_error: ApiError | None = None
        # Shared with the engine thread; dict operations are atomic under the GIL.
        self._streams: dict[str, RequestStream] = {}
        self._outstanding: dict[int, int] = {rank: 0 for rank in self.ranks}
        self._rr = itertools.count()
        self._utility_calls: dict[int, gevent.event.AsyncResult] = {}
        self._call_ids = itertools.count(1)
        self._ready_event: gevent.event.Event | None = None
        self._thread: EngineThread | None = None
        self._transport: Transport | None = None
        self._hub_inbox: HubInbox[Callable[[], None]] | None = None

    # -- lifecycle (HTTP hub) ---------------------------------------------------------------
    def start(self) -> None:
        """Start the engine-I/O thread and bind the sockets; returns once they are bound."""
        self._hub_inbox = HubInbox(run_each)
        self._ready_event = gevent.event.Event()
        self._load_shared_registrations()
        self._thread = EngineThread(self._start_transport)
        self._thread.start()
        if self._transport is None:
            inputs, outputs = self._addresses[:2]
            raise RuntimeError(f"the engine I/O thread could not bind its sockets ({inputs}, "
                               f"{outputs}); the error is logged above. With a TCP handshake "
                               "address the two ports per worker after it must be free.")

    def _start_transport(self, thread: EngineThread) -> None:
        input_address, output_address, input_fd, output_fd = self._addresses
        self._transport = Transport(
            input_address=input_address, output_address=output_address,
            io_threads=self._io_threads, input_fd=input_fd, output_fd=output_fd,
            on_registration=self._on_registration, on_outputs=self._on_outputs,
            on_dead=self._on_dead, coordinator_address=self._coordinator_address,
            on_coordinator=self._on_coordinator)

    def stop(self) -> None:
        """Non-blocking: close the sockets and end the engine-I/O thread."""
        thread, transport = self._thread, self._transport
        if thread is None:
            return
        self._thread = None

        def _close() -> None:
            if transport is not None:
                try:
                    transport.close()
                except Exception:
                    log.exception("closing the engine sockets")
            thread.stop()
        thread.call(_close)

    def wait_ready(self, timeout: float | None) -> bool:
        """HTTP hub: block this greenlet until every expected engine registered."""
        assert self._ready_event is not None
        return self._ready_event.wait(timeout)

    @property
    def healthy(self) -> bool:
        return self.ready and self.dead_reason is None

    def check_available(self) -> None:
        """Raise the 503 a request gets when the engines cannot take it."""
        if self.closed_error is not None:
            raise copy.copy(self.closed_error)
        if self.dead_reason is not None:
            raise EngineDead(f"The engine core is dead: {self.dead_reason}.")
        if not self.ready:
            raise EngineUnavailable("The engine core has not registered yet; retry shortly.")

    # -- requests (pool thread or HTTP hub) -------------------------------------------------
    def new_request_id(self, external_id: str) -> str:
        # PERF: no os.urandom syscall per request (secrets.token_hex was 17% of pool threads).
        return f"{external_id}-{_suffixes.getrandbits(32):08x}"

    def pick_rank(self, requested: int | None = None) -> int:
        """The least-loaded engine, or the one the client pinned (X-data-parallel-rank)."""
        if requested is not None:
            if requested not in self._outstanding:
                raise InvalidRequest(
                    f"Requested data parallel rank {requested} is out of range; this server "
                    f"serves ranks {self.ranks[0]}..{self.ranks[-1]}.",
                    param="X-data-parallel-rank")
            return requested
        if len(self.ranks) == 1:
            return self.ranks[0]
        start = next(self._rr) % len(self.ranks)
        ranks = self.ranks[start:] + self.ranks[:start]  # rotate so ties spread
        rank = min(ranks, key=self._score)
        load = self._load.get(rank)
        if load is not None:
            load[0] += 1  # counts as waiting there until the coordinator's next update
        return rank

    def _score(self, rank: int) -> float:
        """vLLM's DP load score: own in-flight requests, refined by the coordinator's counts."""
        mine = self._outstanding[rank]
        load = self._load.get(rank)
        if load is None:
            return mine
        waiting, running, kv_usage = load[0], load[1], load[2]
        return max(mine, waiting + running) + waiting * 6 * max(0.0, kv_usage - 0.5)

    def submit(self, request: Any, waker: Waker, rank: int | None = None) -> RequestStream:
        """Send one ``EngineCoreRequest``; its outputs will arrive on the returned stream."""
        self.check_available()
        rank = self.pick_rank(rank if rank is not None else request.data_parallel_rank)
        request.current_wave = self.current_wave
        stream = RequestStream(request.request_id, rank, waker, self.abort)
        self._streams[request.request_id] = stream
        self._outstanding[rank] += 1
        frames = protocol.encode_add(_identity(rank), request)
        rid = request.request_id
        wake_wave = None
        if self._coordinator_address and not self.engines_running:
            # 0.32: the first request of an idle DP deployment tells the coordinator to start a
            # wave on every engine (§7.2.4); the 2-byte identity as bin means "wake everyone".
            self.engines_running = True
            wake_wave = msgspec.msgpack.encode([_identity(rank), self.current_wave])

        def send() -> None:
            self._transport.send(frames, lambda error: self._on_add_failed(rid, error))
            if wake_wave is not None:
                self._transport.notify_coordinator(wake_wave)
        self._call_engine(send)
        return stream

    def abort(self, request_ids: list[str]) -> None:
        """Abort requests in their engines and forget them (no acknowledgement comes)."""
        by_rank: dict[int, list[str]] = {}
        for rid in request_ids:
            stream = self._streams.pop(rid, None)
            if stream is None:
                continue
            self._outstanding[stream.engine_rank] -= 1
            by_rank.setdefault(stream.engine_rank, []).append(rid)
        for rank, ids in by_rank.items():
            frames = protocol.encode_abort(_identity(rank), ids)
            self._call_engine(lambda frames=frames: self._transport.send(frames))

    def abort_all(self, error: ApiError) -> None:
        """HTTP hub: end every request in flight with ``error``, in the engines too, and refuse
        new ones (``check_available``): the worker is shutting down."""
        self.closed_error = error
        streams = list(self._streams.values())
        for stream in streams:
            stream.fail(error)
        self.abort([stream.request_id for stream in streams])

    def utility(self, method: str, args: list | tuple = (), rank: int | None = None,
                timeout: float = 60.0) -> Any:
        """HTTP hub: call an engine utility method and wait for its result."""
        self.check_available()
        rank = self.ranks[0] if rank is None else rank
        call_id = next(self._call_ids)
        result = gevent.event.AsyncResult()
        self._utility_calls[call_id] = result
        frames = protocol.encode_utility(_identity(rank), self.client_index, call_id, method,
                                         list(args))
        self._call_engine(lambda: self._transport.send(frames))
        try:
            return result.get(timeout=timeout)
        except gevent.Timeout:
            raise ServerError(f"The engine did not answer `{method}` within {timeout:g} s.")
        finally:
            self._utility_calls.pop(call_id, None)

    @property
    def in_flight(self) -> int:
        return len(self._streams)

    def _call_engine(self, fn: Callable[[], None]) -> None:
        thread = self._thread
        if thread is None:
            raise EngineUnavailable("The server is shutting down.")
        thread.call(fn)

    # -- engine-I/O thread callbacks --------------------------------------------------------
    def _on_outputs(self, outputs: Any, frames: list) -> None:
        streams = self._streams
        aux = frames if len(frames) > 1 else None
        batch = []
        for output in outputs.outputs:
            rid = output.request_id
            stream = streams.get(rid)
            if stream is None:
                continue  # aborted, or a previous worker's request
            batch.append((stream, output, aux))
            if output.finish_reason is not None and streams.pop(rid, None) is not None:
                self._outstanding[stream.engine_rank] -= 1
        if batch:
            version = outputs.weight_version
            self._to_hub(lambda: _deliver(batch, version))
        if outputs.scheduler_stats is not None and self._on_stats is not None:
            self._on_stats(outputs.engine_index, outputs.scheduler_stats)
        utility = outputs.utility_output
        if utility is not None:
            self._to_hub(lambda: self._finish_utility(utility))

    def _finish_utility(self, utility: Any) -> None:
        call = self._utility_calls.get(utility.call_id)
        if call is None:
            return
        if utility.failure_message is not None:
            call.set_exception(ServerError(utility.failure_message))
        else:
            call.set(utility.result[1] if utility.result else None)

    def _on_registration(self, rank: int, payload: bytes) -> None:
        try:
            registration = protocol.decode_registration(payload)
        except Exception:
            log.exception("undecodable registration from engine %d", rank)
            return
        self._save_shared_registration(rank, payload)
        self._to_hub(lambda: self._register(rank, registration))

    def _register(self, rank: int, registration: Any) -> None:
        if rank not in self._outstanding:
            log.warning("ignoring a registration from unexpected engine rank %d", rank)
            return
        known = self.registrations.get(rank)
        self.registrations[rank] = registration
        if known != registration:  # read from the shared file first, then sent live: log once
            log.info("engine %d registered (max_model_len=%d)", rank, registration.max_model_len)
        if all(r in self.registrations for r in self.ranks):
            lens = [self.registrations[r].max_model_len for r in self.ranks]
            if self._cap:
                lens.append(self._cap)
            self.max_model_len = min(lens)
            self.ready = True
            self._ready_event.set()

    def _on_dead(self, reason: str) -> None:
        if not self.ready or self.dead_reason is not None:
            if not self.ready:
                log.warning("engine event before registration ignored: %s", reason)
            return
        self.dead_reason = reason
        log.error("engine core dead: %s", reason)
        self._to_hub(lambda: self._fail_all(EngineDead(f"The engine core is dead: {reason}.")))

    def _on_coordinator(self, counts: Any, wave: int, running: bool) -> None:
        if counts is not None:
            end = self.engine_start + len(self.ranks)
            self._load = {rank: list(c) for rank, c in zip(self.ranks,
                                                           counts[self.engine_start:end])}
        self.current_wave = wave
        self.engines_running = bool(running)

    def _on_add_failed(self, request_id: str, error: Exception) -> None:
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            self._outstanding[stream.engine_rank] -= 1
            failure = EngineUnavailable(f"Could not reach the engine: {error}.")
            self._to_hub(lambda: stream.fail(failure))

    def _fail_all(self, error: ApiError) -> None:
        streams = list(self._streams.values())
        self._streams.clear()
        for stream in streams:
            stream.fail(error)
        for call in list(self._utility_calls.values()):
            call.set_exception(error)
        if self._on_dead_hook is not None:
            self._on_dead_hook(self.dead_reason or "")

    def _to_hub(self, fn: Callable[[], None]) -> None:
        self._hub_inbox.post(fn)

    # -- registrations shared between worker processes ---------------------------------------
    def _save_shared_registration(self, rank: int, payload: bytes) -> None:
        if not self._registration_dir:
            return
        path = os.path.join(self._registration_dir, f"registration-{rank}.msgpack")
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(bytes(payload))
            os.replace(tmp, path)
        except OSError:
            log.warning("could not share engine %d's registration at %s", rank, path)

    def _load_shared_registrations(self) -> None:
        if not self._registration_dir:
            return
        for rank in self.ranks:
            path = os.path.join(self._registration_dir, f"registration-{rank}.msgpack")
            try:
                with open(path, "rb") as f:
                    self._register(rank, protocol.decode_registration(f.read()))
            except FileNotFoundError:
                continue
            except Exception:
                log.exception("ignoring unreadable %s", path)


def _identity(rank: int) -> bytes:
    return rank.to_bytes(2, "little")


def _deliver(batch: list, weight_version: str | None = None) -> None:
    for stream, output, frames in batch:
        stream.deliver(output, frames, weight_version)
