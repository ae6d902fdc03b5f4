"""The engine-core client: the one object request code uses to reach the engines.

``submit``/``abort``/``utility`` may be called from a pool thread or the HTTP hub; they only hand
work to the engine-I/O thread. Outputs come back through ``handoff`` into the HTTP hub, where
each goes to its ``RequestStream``. Registration decides ``max_model_len``, then the engines'
``supported_tasks`` (``engine.tasks``) ``ready``; engine death fails every in-flight request and
turns ``dead``; a stalled engine (``engine.liveness``) takes no new requests until it speaks.

Which thread owns what:
- engine-I/O thread: the request registry (``_registry``: streams and counts per rank, rank
  choice, the coordinator's load view), engine liveness (``_liveness``, pings), the coordinator
  state (``current_wave``, ``engines_running``), ``dead_reason``, and every send (the
  transport's one sender greenlet).
- HTTP hub: registrations (``engine.registrations``), ``ready``, ``max_model_len``,
  ``supported_tasks``, pending
  utility calls (``engine.utility_calls``; the pings there are the engine-I/O thread's).
- Other threads only read what the owners publish by whole-value stores: ``ready``,
  ``dead_reason``, ``current_wave``, ``in_flight``, ``stalled_ranks``.

Runs on: constructed and started in the HTTP hub of a worker; see each method.
"""
from __future__ import annotations

import copy
import logging
import random
import time
from typing import Any, Callable

import gevent
import gevent.event
import msgspec

from engine import protocol, shared_registrations, tasks
from engine.protocol import identity_for_rank as identity
from engine.admission import Admission, Group
from engine.liveness import Liveness
from engine.registrations import Registrations, speaks_033
from engine.registry import RequestRegistry
from engine.request_stats import RequestTiming
from engine.stream import RequestStream, Waker, deliver_all, end_aborted, fail_all
from engine.transport import Transport
from engine.utility_calls import PING_METHOD, UtilityCalls
from engine.utility_calling import UtilityCalling
from base.errors import (ApiError, EngineDead, EngineFailed, EngineStalled, EngineUnavailable,
                         InvalidRequest)
from engine.io_thread import EngineThread
from base.handoff import HubInbox, run_each

log = logging.getLogger("greenfront.engine")

#: The random suffix of internal request ids (vLLM's `<external>-<8 hex>`).
_suffixes = random.Random()


class EngineClient(UtilityCalling):
    """Talks to ``engine_count`` engines (DP ranks ``engine_start``…) over one ROUTER/PULL pair.

    Args:
        input_address / output_address: this client's ZMQ endpoints (or fds to adopt).
        client_index: the index of this client's output socket in the engines' INIT message.
        engine_start / engine_count: the DP ranks this client expects to register.
        registration_dir: where registrations are shared between worker processes, so that a
            restarted worker (the engines register only once per socket) knows them; or "".
        stall_timeout: seconds of engine silence that make a stall (``engine.liveness``; 0: off).
        worker_slot / worker_count: this worker among the deployment's workers. Request and
            utility call ids carry the slot, by which the relay (``engine.relay``) routes
            outputs when the workers share one engine client.
    """

    def __init__(self, *, input_address: str, output_address: str, client_index: int,
                 engine_start: int = 0, engine_count: int = 1, io_threads: int = 4,
                 max_model_len_cap: int | None = None, registration_dir: str = "",
                 input_fd: int | None = None, output_fd: int | None = None,
                 coordinator_address: str = "", on_dead: Callable[[str], None] | None = None,
                 on_ready: Callable[[], None] | None = None, observer: Any = None,
                 stall_timeout: float = 0.0,
                 worker_slot: int = 0, worker_count: int = 1,
                 admission: Admission | None = None,
                 on_rejected: Callable[[str], None] | None = None) -> None:
        self.client_index = client_index
        self._slot = worker_slot
        self._workers = worker_count
        self.ranks = list(range(engine_start, engine_start + engine_count))
        self._addresses = (input_address, output_address, input_fd, output_fd)
        self._io_threads = io_threads
        self._registration_dir = registration_dir
        self._on_dead_hook = on_dead
        self._on_ready_hook = on_ready
        # Engine-I/O thread: ``observer.on_step(outputs, batch)`` sees every step message and
        # its (stream, output, frames) for live requests before they go to the hub (metrics).
        self._observer = observer
        self._coordinator_address = coordinator_address
        self.engine_start = engine_start
        # DP coordinator view (docs/engine-protocol.md §7.2): the current wave, and whether the engines are running one.
        self.current_wave = 0
        self.engines_running = True
        # Engine-I/O thread: only 0.32 coordinators take the wake-up (0.33 ones log it as an error).
        self._wake_coordinator = True
        self._registrations = Registrations(self.ranks, max_model_len_cap)
        self.registrations = self._registrations.by_rank  # HTTP hub: rank -> registration
        self.ready = False
        #: HTTP hub: the task discovery that turns ``ready`` has started (once: a registration
        #: read from the run dir and then sent live both complete the set).
        self._discovering = False
        self.dead_reason: str | None = None
        self.max_model_len: int | None = None
        self.supported_tasks: tuple[str, ...] = ()  # engine.tasks; known before ready
        #: Set by ``abort_all`` (the worker is shutting down): no new request is sent.
        self.closed_error: ApiError | None = None
        # Queue limits (``engine.admission``, checked in ``_add``); on_rejected(reason): the hub.
        self._admission, self._on_rejected = admission, on_rejected
        self._registry = RequestRegistry(self.ranks, admission and admission.publish)
        self._liveness = Liveness(self.ranks, stall_timeout, time.monotonic())
        self._calls = UtilityCalls(worker_slot, worker_count)
        self._ready_event: gevent.event.Event | None = None
        self._thread: EngineThread | None = None
        self._transport: Transport | None = None
        self._hub_inbox: HubInbox[Callable[[], None]] | None = None

    # -- lifecycle (HTTP hub) ---------------------------------------------------------------
    def start(self) -> None:
        """Start the engine-I/O thread and bind the sockets; returns once they are bound."""
        self._hub_inbox = HubInbox(run_each)
        self._ready_event = gevent.event.Event()
        if self._registration_dir:
            for rank, registration in shared_registrations.load(self._registration_dir, self.ranks):
                self._register(rank, registration)
                self._wake_coordinator &= not speaks_033(registration)
        self._thread = EngineThread(self._start_transport)
        self._thread.start()
        if self._transport is None:
            inputs, outputs = self._addresses[:2]
            raise RuntimeError(f"the engine I/O thread could not bind its sockets ({inputs}, "
                               f"{outputs}); the error is logged above. With a TCP handshake "
                               "address the two ports per worker after it must be free.")

    def _start_transport(self, thread: EngineThread) -> None:
        """Engine-I/O thread: bind the sockets, start the liveness watch."""
        input_address, output_address, input_fd, output_fd = self._addresses
        self._transport = Transport(
            input_address=input_address, output_address=output_address,
            io_threads=self._io_threads, input_fd=input_fd, output_fd=output_fd,
            on_registration=self._on_registration, on_outputs=self._on_outputs,
            on_dead=self._on_dead, coordinator_address=self._coordinator_address,
            on_coordinator=self._on_coordinator, between_messages=thread.run_pending)
        if self._liveness.enabled:
            self._transport.spawn(self._watch_liveness)

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
        """Registered, alive, and at least one engine not stalled (readiness)."""
        return (self.ready and self.dead_reason is None
                and len(self._liveness.stalled) < len(self.ranks))

    @property
    def stalled_ranks(self) -> frozenset[int]:
        """Any thread: the ranks stalled now (published by the engine-I/O thread)."""
        return self._liveness.stalled

    def stalled_for(self) -> float:
        """Any thread: seconds the longest-stalled engine has been silent (0: none stalled)."""
        return self._liveness.longest_silence(time.monotonic())

    def check_available(self, rank: int | None = None) -> None:
        """Any thread: raise the 503 a request (pinned to ``rank``) gets when the engines cannot
        take it."""
        if self.closed_error is not None:
            raise copy.copy(self.closed_error)
        if self.dead_reason is not None:
            raise EngineDead(f"The engine core is dead: {self.dead_reason}.")
        if not self.ready:
            raise EngineUnavailable("The engine core has not registered yet; retry shortly.")
        if (error := self._liveness.refusal(rank, time.monotonic())) is not None:
            raise error

    # -- requests (pool thread or HTTP hub) -------------------------------------------------
    def new_request_id(self, external_id: str) -> str:
        # PERF: no os.urandom syscall per request (secrets.token_hex was 17% of pool threads).
        if self._workers == 1:
            return f"{external_id}-{_suffixes.getrandbits(32):08x}"
        # The last two hex digits name this worker (engine.protocol.split routes by them).
        return f"{external_id}-{_suffixes.getrandbits(24):06x}{self._slot:02x}"

    def submit(self, request: Any, waker: Waker, rank: int | None = None,
               group: Group | None = None) -> RequestStream:
        """Send one ``EngineCoreRequest``; its outputs will arrive on the returned stream.

        Here (the caller's thread) only checks and encodes; the engine-I/O thread applies the
        queue limits to ``group`` (the HTTP request's engine requests), chooses the rank (least
        loaded, or the pinned one), registers the stream and sends."""
        requested = rank if rank is not None else request.data_parallel_rank
        if requested is not None and requested not in self.ranks:
            raise InvalidRequest(
                f"Requested data parallel rank {requested} is out of range; this server "
                f"serves ranks {self.ranks[0]}..{self.ranks[-1]}.",
                param="X-data-parallel-rank")
        self.check_available(requested)
        request.current_wave = self.current_wave
        stream = RequestStream(request.request_id, -1, waker, self.abort)
        stream.prefill_tokens = len(request.prompt_token_ids or ())
        if self._observer is not None:
            lora = request.lora_request
            stream.timing = RequestTiming(request.arrival_time, lora.lora_name if lora else None)
        frames = protocol.encode_add(b"", request)
        self._call_engine(lambda: self._add(stream, frames, requested, group))
        return stream

    def abort(self, request_ids: list[str]) -> None:
        """Any thread: abort requests in their engines and forget them (no acknowledgement)."""
        if request_ids and self._thread is not None:
            self._call_engine(lambda ids=list(request_ids): self._abort(ids))

    def abort_external(self, external_ids: list[str]) -> None:
        """Any thread: abort requests by external id; they end with finish reason ``abort``."""
        def end() -> None:  # engine-I/O thread
            streams = self._registry.pop_external(external_ids)
            self._post_aborts(streams)
            self._to_hub(lambda: end_aborted(streams))
        if external_ids and self._thread is not None:
            self._call_engine(end)

    def abort_all(self, error: ApiError) -> None:
        """Any thread: end every request in flight with ``error``, in the engines too, and
        refuse new ones (``check_available``, and ``_add`` for those already handed over): the
        worker is shutting down."""
        self.closed_error = error
        if self._thread is not None:
            self._call_engine(self._abort_all)

    def _abort_all(self) -> None:
        streams = self._registry.pop_all()
        self._post_aborts(streams)
        error = self.closed_error
        self._to_hub(lambda: fail_all(streams, error))

    @property
    def in_flight(self) -> int:
        """Any thread: requests registered in the engines (published by the engine thread)."""
        return self._registry.in_flight

    def _call_engine(self, fn: Callable[[], None]) -> None:
        thread = self._thread
        if thread is None:
            raise EngineUnavailable("The server is shutting down.")
        thread.call(fn)

    # -- engine-I/O thread: requests --------------------------------------------------------
    def _add(self, stream: RequestStream, frames: list, requested: int | None,
             group: Group | None = None) -> None:
        registry = self._registry
        error = (EngineDead(f"The engine core is dead: {self.dead_reason}.")
                 if self.dead_reason is not None else
                 copy.copy(self.closed_error) if self.closed_error is not None else
                 self._liveness.refusal(requested, time.monotonic()))
        if error is None and group is not None and self._admission is not None:
            error = self._admitted(group)
        rank = requested if requested is not None else registry.choose(self._liveness.stalled)
        if error is not None or rank is None:
            failure = error or EngineUnavailable("No engine can take the request.")
            self._to_hub(lambda: stream.fail(failure))
            return
        if registry.add(stream, rank):
            self._liveness.became_busy(rank, time.monotonic())
        frames[0] = identity(rank)
        rid = stream.request_id
        self._transport.post(frames, lambda error: self._on_add_failed(rid, error))
        if self._coordinator_address and not self.engines_running and self._wake_coordinator:
            # 0.32: the first request of an idle DP deployment tells the coordinator to start a
            # wave on every engine (docs/engine-protocol.md §7.2.4); the 2-byte identity as bin means "wake everyone".
            self.engines_running = True
            self._transport.post_coordinator(
                msgspec.msgpack.encode([identity(rank), self.current_wave]))

    def _admitted(self, group: Group) -> ApiError | None:
        """The queue limits' verdict on ``group`` (decided by its first request)."""
        fresh, registry, hook = not group.decided, self._registry, self._on_rejected
        rejection = self._admission.verdict(group, registry.in_flight, registry.prefill_tokens)
        if rejection is not None and fresh and hook is not None:
            self._to_hub(lambda: hook(rejection.reason))
        return copy.copy(rejection) if rejection is not None else None

    def _abort(self, request_ids: list[str]) -> None:
        self._post_aborts([s for s in map(self._registry.pop, request_ids) if s is not None])

    def _post_aborts(self, streams: list[RequestStream]) -> None:
        """One ABORT per engine for ``streams`` (the engines send nothing back for it)."""
        by_rank: dict[int, list[str]] = {}
        for stream in streams:
            by_rank.setdefault(stream.engine_rank, []).append(stream.request_id)
        for rank, ids in by_rank.items():
            self._transport.post(protocol.encode_abort(identity(rank), ids))

    def _on_add_failed(self, request_id: str, error: Exception) -> None:
        stream = self._registry.pop(request_id)
        if stream is not None:
            failure = EngineUnavailable(f"Could not reach the engine: {error}.")
            self._to_hub(lambda: stream.fail(failure))

    # -- engine-I/O thread: what the engines send ---------------------------------------------
    def _on_outputs(self, outputs: Any, frames: list) -> None:
        registry = self._registry
        self._heard(outputs.engine_index)
        aux = frames if len(frames) > 1 else None
        batch = []
        for output in outputs.outputs:
            rid = output.request_id
            stream = registry.get(rid)
            if stream is None:
                continue  # aborted, or a previous worker's request
            batch.append((stream, output, aux))
            if stream.prefill_tokens:
                registry.prefilled(stream)
            if output.finish_reason is not None:
                registry.pop(rid)
        if self._observer is not None:
            # Before the hand-off: the hub reads a request's timing once its last output is in.
            self._observer.on_step(outputs, batch)
        if batch:
            version = outputs.weight_version
            self._to_hub(lambda: deliver_all(batch, version))
        utility = outputs.utility_output
        if utility is not None and not self._calls.is_ping(utility.call_id):
            self._to_hub(lambda: self._calls.finish(utility))

    def _heard(self, rank: int) -> None:
        if self._liveness.heard(rank, time.monotonic()):
            log.warning("engine %d answers again: taken back", rank)

    def _watch_liveness(self) -> None:
        """Engine-I/O thread: ping silent engines, end the requests of stalled ones."""
        liveness = self._liveness
        tick = min(1.0, liveness.timeout / 10)
        while True:
            gevent.sleep(tick)
            if not self.ready or self.dead_reason is not None:
                continue
            to_ping, stalled = liveness.check(time.monotonic(), self._registry.outstanding)
            for rank in to_ping:
                self._transport.post(protocol.encode_utility(
                    identity(rank), self.client_index, self._calls.ping(rank), PING_METHOD, []))
            for rank in stalled:
                self._on_stalled(rank)

    def _on_stalled(self, rank: int) -> None:
        streams = self._registry.pop_rank(rank)
        log.error("engine %d said nothing for %g s: stalled; %d requests in flight on it end "
                  "with 503, new ones avoid it until it answers", rank, self._liveness.timeout,
                  len(streams))
        if not streams:
            return
        # Queued in the socket: a stopped engine that resumes drops the work nobody waits for.
        self._post_aborts(streams)
        error = (self._liveness.refusal(rank, time.monotonic())
                 or EngineStalled(f"Engine {rank} is stalled."))
        self._to_hub(lambda: fail_all(streams, error))

    def _on_registration(self, rank: int, payload: bytes) -> None:
        try:
            registration = protocol.decode_registration(payload)
        except Exception:
            log.exception("undecodable registration from engine %d", rank)
            return
        self._heard(rank)
        self._wake_coordinator &= not speaks_033(registration)
        if self._registration_dir:
            shared_registrations.save(self._registration_dir, rank, payload)
        self._to_hub(lambda: self._register(rank, registration))

    def _register(self, rank: int, registration: Any) -> None:
        if self._registrations.add(rank, registration):
            self.max_model_len = self._registrations.max_model_len
            if not self._discovering:
                self._discovering = True
                gevent.spawn(self._discover_tasks)

    def _discover_tasks(self) -> None:
        """HTTP hub: ask what the engines do (a pooling engine registers as a generate engine
        does, docs/pooling.md §1), then turn ready."""
        self.supported_tasks = tasks.discover(
            lambda: self._call_utility(tasks.SUPPORTED_TASKS_METHOD, (), self.ranks[0], 60.0))
        if self._on_ready_hook is not None:
            self._on_ready_hook()  # before any request can see ready
        self.ready = True
        self._ready_event.set()

    def _on_dead(self, reason: str) -> None:
        if not self.ready or self.dead_reason is not None:
            if not self.ready:
                log.warning("engine event before registration ignored: %s", reason)
            return
        self.dead_reason = reason
        log.error("engine core dead: %s", reason)
        streams = self._registry.pop_all()
        error = EngineFailed()  # vLLM's 500 for requests in flight (new ones: 503 EngineDead)
        self._to_hub(lambda: self._fail_all(streams, error))

    def _on_coordinator(self, counts: Any, wave: int, running: bool) -> None:
        if counts is not None:
            end = self.engine_start + len(self.ranks)
            self._registry.load = {rank: list(c) for rank, c in
                                   zip(self.ranks, counts[self.engine_start:end])}
        self.current_wave = wave
        self.engines_running = bool(running)

    # -- HTTP hub ---------------------------------------------------------------------------
    def _fail_all(self, streams: list[RequestStream], error: ApiError) -> None:
        fail_all(streams, error)
        self._calls.fail_all(error)
        if self._on_dead_hook is not None:
            self._on_dead_hook(self.dead_reason or "")

    def _to_hub(self, fn: Callable[[], None]) -> None:
        self._hub_inbox.post(fn)
