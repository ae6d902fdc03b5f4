"""The simulator process: sockets, handshake, the poll/step loop, faults and signals.

Owns the ZMQ side of a simulated engine core: connecting (handshake or direct),
sending the registration, reading ADD/ABORT/UTILITY, running the step clock,
sending every output message, ENGINE_CORE_DEAD on ``--die-after``, silence on
``--stall-after``, and a quiet exit 0 on SIGTERM/SIGINT. Started by
``python -m engine.sim`` (``engine.sim.__main__``).

Runs on: the simulator process, one thread, plain (non-green) pyzmq.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

import msgspec
import zmq

from engine.protocol import (
    ENGINE_CORE_DEAD,
    EngineCoreOutputs,
    ProtocolError,
    RequestType,
    SamplingParamsError,
    decode_init,
    decode_request,
    encode_hello,
    encode_outputs,
    encode_ready,
    encode_utility_reply,
    identity_for_rank,
    validate_sampling_params,
)
from engine.sim.config import SimConfig
from engine.sim.pooling import POOLING_SAMPLING, pooled_values
from engine.sim.registration import registration
from engine.sim.scheduler import ClientBatch, Scheduler
from engine.sim.utility import DEFERRED, UtilityFailure, UtilityHandler

__all__ = ["SimEngine", "main"]

#: How long to wait for INIT after HELLO (vLLM's engine waits 5 minutes).
HANDSHAKE_TIMEOUT_S = 300.0
#: LINGER on output PUSH sockets, as vLLM sets it, so ENGINE_CORE_DEAD gets out.
OUTPUT_LINGER_MS = 4000
#: LINGER on the handshake DEALER (vLLM uses 5 s) so READY gets out before close.
HANDSHAKE_LINGER_MS = 5000
#: Upper bound of one poll, so the loop stays responsive without busy-waiting.
MAX_POLL_MS = 1000


class _Stop(BaseException):
    """Raised from the signal handler to unwind the loop (not an ``Exception``)."""


def _raise_stop(signum: int, frame: Any) -> None:
    raise _Stop(signum)


class SimEngine:
    """One simulated engine core (one DP rank)."""

    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self._ctx = zmq.Context()
        self._identity = identity_for_rank(cfg.rank)
        self._inputs: list[zmq.Socket] = []
        self._outputs: list[zmq.Socket] = []
        self._sched: Scheduler | None = None
        self._util: UtilityHandler | None = None
        self._stats_on = not cfg.disable_log_stats
        self._adds = 0
        self._stalled = False
        self._input_dead = False
        self._fatal = False  # a request that kills a real engine arrived
        self._pause_waiters: list[tuple[int, int]] = []
        self._next_step: float | None = None
        self._itl = cfg.itl_ms / 1000.0

    # --------------------------------------------------------------- logging

    def _log(self, msg: str) -> None:
        sys.stderr.write(f"engine.sim rank={self.cfg.rank} {msg}\n")
        sys.stderr.flush()

    def _debug(self, msg: str) -> None:
        if self.cfg.verbose:
            self._log(msg)

    # ------------------------------------------------------------ connecting

    def _socket(self, kind: int) -> zmq.Socket:
        sock = self._ctx.socket(kind)
        # Unbounded queues, as vLLM configures its engine sockets.
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        return sock

    def _connect_io(self, inputs: list[str], outputs: list[str]) -> None:
        for addr in inputs:
            sock = self._socket(zmq.DEALER)
            sock.setsockopt(zmq.IDENTITY, self._identity)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(addr)
            self._inputs.append(sock)
        for addr in outputs:
            sock = self._socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, OUTPUT_LINGER_MS)
            sock.connect(addr)
            self._outputs.append(sock)

    def _send_registration(self, dp_stats_address: str | None) -> None:
        payload = registration(self.cfg, dp_stats_address)
        for sock in self._inputs:
            sock.send(payload)

    def _handshake(self, addr: str) -> bool:
        # Steps as a real headless engine: 1 HELLO, 2 INIT, 3 connect + register, 4 READY.
        hs = self._socket(zmq.DEALER)
        hs.setsockopt(zmq.IDENTITY, self._identity)
        hs.setsockopt(zmq.LINGER, HANDSHAKE_LINGER_MS)
        hs.connect(addr)
        hs.send(encode_hello(local=False, headless=True))
        if not hs.poll(int(HANDSHAKE_TIMEOUT_S * 1000), zmq.POLLIN):
            self._log(f"no INIT from {addr} within {HANDSHAKE_TIMEOUT_S:.0f} s")
            hs.close(linger=0)
            return False
        frames = hs.recv_multipart()
        try:
            init = decode_init(frames[-1])
        except Exception as exc:  # noqa: BLE001 - any decode failure ends startup
            self._log(f"undecodable INIT: {exc}")
            hs.close(linger=0)
            return False
        addrs = init.addresses
        if not addrs.inputs or not addrs.outputs:
            self._log("INIT has no input or output addresses")
            hs.close(linger=0)
            return False
        if addrs.coordinator_input or addrs.coordinator_output:
            self._log("INIT names a DP coordinator; the simulator does not connect to it")
        self._connect_io(addrs.inputs, addrs.outputs)
        self._send_registration(addrs.frontend_stats_publish_address)
        hs.send(encode_ready(local=False, headless=True))
        hs.close()
        return True

    def _connect(self) -> bool:
        cfg = self.cfg
        if cfg.handshake:
            if not self._handshake(cfg.handshake):
                return False
        else:
            self._connect_io(cfg.inputs, cfg.outputs)
            self._send_registration(None)
        self._sched = Scheduler(cfg)
        self._util = UtilityHandler(cfg, self._sched, self._send_batches)
        return True

    # ------------------------------------------------------------------ run

    def run(self) -> int:
        """Connect and serve until a signal (0), ``--die-after`` (1) or a startup failure (1)."""
        signal.signal(signal.SIGTERM, _raise_stop)
        signal.signal(signal.SIGINT, _raise_stop)
        try:
            if not self._connect():
                self._ctx.destroy(linger=0)
                return 1
            cfg = self.cfg
            self._log(
                f"ready inputs={[s.getsockopt_string(zmq.LAST_ENDPOINT) for s in self._inputs]} "
                f"outputs={[s.getsockopt_string(zmq.LAST_ENDPOINT) for s in self._outputs]} "
                f"vllm_version={cfg.vllm_version} mode={cfg.output_mode} itl_ms={cfg.itl_ms:g} "
                f"ttft_ms={cfg.ttft_ms:g} stats={'on' if self._stats_on else 'off'}"
            )
            if cfg.die_after == 0:
                return self._die()
            return self._loop()
        except _Stop:
            # NOTE: like a real engine on SIGTERM: nothing more goes on the wire.
            self._ctx.destroy(linger=0)
            return 0

    def _loop(self) -> int:
        poller = zmq.Poller()
        for sock in self._inputs:
            poller.register(sock, zmq.POLLIN)
        sched = self._sched
        assert sched is not None
        while True:
            due = None if self._stalled else self._due()
            now = time.monotonic()
            if due is None:
                timeout = MAX_POLL_MS
            else:
                timeout = min(MAX_POLL_MS, max(0, int((due - now) * 1000.0 + 0.999)))
            if self._input_dead and self._inputs:
                # The input "thread" is dead: stop reading but keep the sockets open.
                for sock in self._inputs:
                    poller.unregister(sock)
                self._inputs = []
            for sock, _ in poller.poll(timeout):
                self._drain(sock)
            if self._fatal:
                return self._die()
            if self._stalled:
                continue
            now = time.monotonic()
            due = self._due()
            if due is not None and now >= due:
                self._step(now, due)
                if self.cfg.die_after is not None and sched.first_tokens >= self.cfg.die_after:
                    return self._die()

    def _due(self) -> float | None:
        sched = self._sched
        assert sched is not None
        wake = sched.next_wakeup()
        if wake is None:
            self._next_step = None
            return None
        if sched.num_running:
            if self._next_step is None:
                self._next_step = time.monotonic() + self._itl
            return self._next_step
        return wake

    def _step(self, now: float, due: float) -> None:
        sched = self._sched
        assert sched is not None
        batches, finished = sched.step(now)
        self._send_batches(batches, step=True)
        if sched.num_running:
            nxt = due + self._itl
            # Overran (or the process was suspended): step again now, don't burst.
            self._next_step = nxt if nxt > now - self._itl else now
        else:
            self._next_step = None
            if finished and self._stats_on:
                self._send_stats_only()
        if self._pause_waiters and sched.drained():
            waiters, self._pause_waiters = self._pause_waiters, []
            for client, call_id in waiters:
                self._reply(client, call_id, None, None)

    # -------------------------------------------------------------- sending

    def _send_batches(self, batches: dict[int, ClientBatch], step: bool = False) -> None:
        sched = self._sched
        assert sched is not None
        stats = sched.stats() if self._stats_on and batches else None
        now = time.monotonic()
        version = self._util.weight_version if self._util is not None else "default"
        for client in sorted(batches):
            batch = batches[client]
            msg = EngineCoreOutputs(
                self.cfg.rank, batch.outputs, stats, now, None, batch.finished_requests, None, None, version
            )
            stats = None  # one message per step carries the stats
            self._outputs[client].send_multipart(encode_outputs(msg, batch.aux_frames), copy=False)
        if not step and batches and sched.num_running == 0 and self._stats_on:
            self._send_stats_only()

    def _send_stats_only(self) -> None:
        sched = self._sched
        assert sched is not None
        version = self._util.weight_version if self._util is not None else "default"
        msg = EngineCoreOutputs(self.cfg.rank, [], sched.stats(), time.monotonic(), weight_version=version)
        self._outputs[0].send_multipart(encode_outputs(msg))

    def _reply(self, client: int, call_id: int, result: Any, failure: str | None) -> None:
        frames = encode_utility_reply(self.cfg.rank, call_id, result, failure, time.monotonic())
        self._outputs[client].send_multipart(frames)

    def _die(self) -> int:
        self._log("fault injection: sending ENGINE_CORE_DEAD and exiting 1")
        for sock in self._outputs:
            sock.send(ENGINE_CORE_DEAD)
        for sock in self._inputs:
            sock.close(linger=0)
        for sock in self._outputs:
            sock.close()  # LINGER lets the sentinel out
        self._ctx.term()
        return 1

    # ------------------------------------------------------------ receiving

    def _drain(self, sock: zmq.Socket) -> None:
        while not self._input_dead:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._handle(frames)

    def _input_error(self, msg: str) -> None:
        if self.cfg.strict_input_thread:
            self._log(f"input thread died (as a real engine's would): {msg}")
            self._input_dead = True
        else:
            self._log(f"ignoring request: {msg}")

    def _handle(self, frames: list[bytes]) -> None:
        if self._stalled:
            return
        try:
            kind, obj = decode_request(frames)
        except ProtocolError as exc:
            self._input_error(str(exc))
            return
        if kind == RequestType.ADD:
            self._on_add(obj)
        elif kind == RequestType.ABORT:
            self._on_abort(obj)
        elif kind == RequestType.UTILITY:
            self._on_utility(*obj)
        else:
            self._debug(f"ignoring request type {kind.hex()}")

    def _on_add(self, req: Any) -> None:
        sched = self._sched
        assert sched is not None
        self._adds += 1
        stall_after = self.cfg.stall_after
        if stall_after is not None and self._adds > stall_after:
            self._log(f"fault injection: stalling on ADD #{self._adds} (no more output of any kind)")
            self._stalled = True
            return
        sp = req.sampling_params
        if sp is not None and self.cfg.runner == "pooling":
            self._log(f"{req.request_id}: a generation request is fatal to a pooling engine, as "
                      "to vLLM 0.32's (docs/pooling.md §1)")
            self._fatal = True
            return
        pooled = None
        if sp is None and req.pooling_params is not None and self.cfg.runner == "pooling":
            # Scheduled as a one-step request; its output is the pooled values (sim.pooling).
            pooled = pooled_values(req.prompt_token_ids or [], req.pooling_params,
                                   self.cfg.convert)
            sp = POOLING_SAMPLING
            req = msgspec.structs.replace(req, sampling_params=sp)
        if sp is None:
            self._input_error(f"{req.request_id}: no sampling_params (not a pooling engine)")
            return
        try:
            # Without a vocabulary, like the engine's input thread: vocab checks are the
            # frontend's job, and the served tokenizer may be larger than --vocab-size.
            validate_sampling_params(sp, None)
        except SamplingParamsError as exc:
            self._input_error(f"{req.request_id}: invalid SamplingParams: {exc}")
            return
        if not 0 <= req.client_index < len(self._outputs):
            self._input_error(f"{req.request_id}: client_index {req.client_index} has no output socket")
            return
        if sched.has_request(req.request_id):
            self._log(f"ignoring duplicate request id {req.request_id}")
            return
        lora = req.lora_request
        if lora is not None and (lora.lora_int_id < 1 or not lora.lora_path):
            # vLLM's LoRARequest refuses these while the ADD is decoded.
            self._input_error(f"{req.request_id}: invalid lora_request {lora}")
            return
        if lora is not None:
            self._use_lora(req.request_id, lora)
        if sched.reject_new:
            self._send_batches(sched.reject_paused(req.request_id, req.client_index))
            return
        sim = sched.add(req, time.monotonic())
        sim.pooling = pooled
        for warning in sim.warnings:
            self._log(f"{req.request_id}: {warning}")
        self._debug(f"ADD {req.request_id} prompt_len={sim.prompt_len} max_tokens={sim.max_tokens}"
                    f" wave={req.current_wave} client={req.client_index}{_add_notes(req)}")

    def _use_lora(self, request_id: str, lora: Any) -> None:
        """A request's adapter, as a real engine treats it: without LoRA support it is ignored;
        an id never given to ``add_lora`` is not refused but loaded from ``lora_path`` on demand
        (vLLM's LRU LoRA manager, when the request is scheduled; the simulator's loads always
        work). Both are logged: a frontend rarely means either."""
        util = self._util
        assert util is not None
        if not self.cfg.enable_lora:
            self._log(f"{request_id}: LoRA is not enabled; lora_request "
                      f"{lora.lora_name!r} (id {lora.lora_int_id}) ignored")
        elif lora.lora_int_id not in util.loras:
            self._log(f"{request_id}: LoRA id {lora.lora_int_id} ({lora.lora_name!r}) was never "
                      f"added; loading it on demand from {lora.lora_path!r}")
            util.loras[lora.lora_int_id] = lora.lora_name

    def _on_abort(self, request_ids: list[str]) -> None:
        sched = self._sched
        assert sched is not None
        found = sched.abort(request_ids)
        self._debug(f"ABORT {request_ids} ({found} live)")
        if found and sched.num_running == 0 and self._stats_on:
            self._send_stats_only()

    def _on_utility(self, client: int, call_id: int, method: str, args: list) -> None:
        util = self._util
        assert util is not None
        if not 0 <= client < len(self._outputs):
            self._input_error(f"utility {method}: client_index {client} has no output socket")
            return
        self._debug(f"UTILITY {method}{tuple(args)} call_id={call_id}")
        try:
            result = util.call(method, args, time.monotonic())
        except UtilityFailure as exc:
            self._reply(client, call_id, None, str(exc))
            return
        if result is DEFERRED:
            self._pause_waiters.append((client, call_id))
        else:
            self._reply(client, call_id, result, None)


def _add_notes(req: Any) -> str:
    """The optional parts of an ADD that the --verbose log names (tests read them)."""
    notes = []
    lora = req.lora_request
    if lora is not None:
        notes.append(f"lora={lora.lora_name}:{lora.lora_int_id}")
    so = req.sampling_params.structured_outputs
    if so:
        kind = next((k for k in ("json", "regex", "choice", "grammar", "json_object",
                                 "structural_tag") if so.get(k) is not None), "none")
        notes.append(f"structured={so.get('_backend')}:{kind}"
                     f"{':auto' if so.get('_backend_was_auto') else ''}")
    if req.sampling_params.thinking_token_budget is not None:
        notes.append(f"thinking_token_budget={req.sampling_params.thinking_token_budget}")
    if req.reasoning_ended is not None:
        notes.append(f"reasoning_ended={req.reasoning_ended}")
    return "".join(" " + n for n in notes)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m engine.sim``."""
    from engine.sim.config import parse_args

    return SimEngine(parse_args(argv)).run()
