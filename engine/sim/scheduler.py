"""The simulator's scheduler: waiting/running queues, one step, stats.

Owns request lifecycle inside the simulator: ``add`` (queue until the
request's first-token time), ``step`` (one token for every running request due
this step, grouped into one batch per client), ``abort``, pause/resume, and the
``SchedulerStats`` snapshot. Pure logic, no sockets: ``engine.sim.engine``
calls it and sends what it returns.

Runs on: the simulator process.

PERF: the step loop is the simulator's hot path (2,000 running requests every
10 ms on one core), so it avoids per-token allocations beyond the output struct
and its one-element token list.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from engine.protocol import (
    EngineCoreEvent,
    EngineCoreEventType,
    EngineCoreOutput,
    EngineCoreOutput032,
    EngineCoreRequest,
    FinishReason,
    PrefillStats,
    PrefixCacheStats,
    SchedulerStats,
)
from engine.sim.config import SimConfig
from engine.sim.pooling import pooled_output
from engine.sim.request import SimRequest

__all__ = ["ClientBatch", "Scheduler"]

_STOP = int(FinishReason.STOP)
_LENGTH = int(FinishReason.LENGTH)
_ABORT = int(FinishReason.ABORT)
_ERROR = int(FinishReason.ERROR)
_QUEUED = int(EngineCoreEventType.QUEUED)
_SCHEDULED = int(EngineCoreEventType.SCHEDULED)


@dataclass
class ClientBatch:
    """Everything one output socket gets from one step (or one engine-side abort)."""

    outputs: list = field(default_factory=list)
    aux_frames: list[bytes] = field(default_factory=list)
    finished_requests: list[str] | None = None


class Scheduler:
    """Request queues and the step function of one simulated engine."""

    def __init__(self, cfg: SimConfig) -> None:
        self._cfg = cfg
        self._stats_on = not cfg.disable_log_stats
        self._out_cls = EngineCoreOutput if cfg.emits_033_outputs else EngineCoreOutput032
        self._reqs: dict[str, SimRequest] = {}
        self._waiting: list[tuple[float, int, SimRequest]] = []  # heap by first-token time
        self._held: list[SimRequest] = []  # ADDs received while paused
        self._running: list[SimRequest] = []
        self._seq = 0
        self._step_no = 0
        self._kv_tokens = 0
        self._kv_capacity = max(1, cfg.num_gpu_blocks * cfg.block_size)
        self._admitted = (0, 0)  # (requests, prompt tokens) admitted since the last stats()
        self.paused: str | None = None  # None, "keep" or "wait"
        # 0.33's pause_generation (modes abort/wait): new ADDs are refused, not held.
        self.reject_new = False
        #: Requests that have produced their first token (for --die-after).
        self.first_tokens = 0

    # ------------------------------------------------------------ queries

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting) + len(self._held)

    def has_request(self, request_id: str) -> bool:
        return request_id in self._reqs

    def next_wakeup(self) -> float | None:
        """Monotonic time of the next step worth running, or None when idle."""
        if self.paused == "keep":
            return None
        if self._running:
            return 0.0  # caller's step clock decides
        if self._waiting:
            return self._waiting[0][0]
        return None

    def drained(self) -> bool:
        """True when nothing admitted before a pause is still queued or running."""
        return not self._running and not self._waiting

    # ----------------------------------------------------------- changes

    def add(self, req: EngineCoreRequest, now: float) -> SimRequest:
        """Queue a decoded, validated ADD."""
        sim = SimRequest(req, self._cfg, now)
        self._reqs[sim.request_id] = sim
        if self.paused is not None:
            self._held.append(sim)
        else:
            self._enqueue(sim)
        return sim

    def _enqueue(self, sim: SimRequest) -> None:
        self._seq += 1
        heapq.heappush(self._waiting, (sim.ready_at, self._seq, sim))

    def abort(self, request_ids: list[str]) -> int:
        """Client ABORT: forget the ids, emit nothing. Returns how many were live."""
        found = 0
        for rid in request_ids:
            sim = self._reqs.pop(rid, None)
            if sim is not None:
                found += 1
                self._finish(sim)
        if found:
            self._running = [r for r in self._running if not r.done]
            # Aborts of queued requests are rare: rebuild instead of tracking.
            self._waiting = [e for e in self._waiting if not e[2].done]
            heapq.heapify(self._waiting)
            self._held = [r for r in self._held if not r.done]
        return found

    def abort_all(self) -> dict[int, ClientBatch]:
        """Engine-side abort of everything (pause mode "abort"): finish_reason ABORT outputs."""
        batches: dict[int, ClientBatch] = {}
        out_cls = self._out_cls
        for sim in list(self._reqs.values()):
            batch = batches.setdefault(sim.client_index, ClientBatch(finished_requests=[]))
            batch.outputs.append(out_cls(sim.request_id, [], None, None, None, _ABORT))
            batch.finished_requests.append(sim.request_id)
            self._finish(sim)
        self._reqs.clear()
        self._running = []
        self._waiting = []
        self._held = []
        return batches

    def pause(self, mode: str) -> None:
        """Stop admitting ("wait": running ones finish) or freeze everything ("keep")."""
        self.paused = "wait" if mode == "wait" else "keep"

    def resume(self, now: float) -> None:
        """Admit again; ADDs held during the pause get their first-token delay from now."""
        self.paused = None
        self.reject_new = False
        held, self._held = self._held, []
        for sim in held:
            if not sim.done:
                sim.ready_at = now + max(0.0, sim.ready_at - sim.queued_at)
                self._enqueue(sim)

    def _finish(self, sim: SimRequest) -> None:
        if sim.running:
            self._kv_tokens -= sim.prompt_len + sim.n_out
            sim.running = False
        sim.done = True

    # -------------------------------------------------------------- step

    def _admit(self, now: float) -> tuple[int, int]:
        waiting = self._waiting
        running = self._running
        cap = self._cfg.max_num_seqs
        count = tokens = 0
        while waiting and waiting[0][0] <= now and len(running) < cap:
            sim = heapq.heappop(waiting)[2]
            if sim.done:
                continue
            sim.running = True
            sim.start_step = self._step_no
            running.append(sim)
            self._kv_tokens += sim.prompt_len
            count += 1
            tokens += sim.prompt_len
        return count, tokens

    def step(self, now: float) -> tuple[dict[int, ClientBatch], int]:
        """Run one engine step.

        Returns:
            ``(batches by client_index, finished_count)``; batches only holds
            clients with at least one output.
        """
        if self.paused == "keep":
            return {}, 0
        self._step_no += 1
        step_no = self._step_no
        # "wait" still admits what was queued before the pause (new ADDs are held).
        count, tokens = self._admit(now)
        self._admitted = (self._admitted[0] + count, self._admitted[1] + tokens)
        batches: dict[int, ClientBatch] = {}
        out_cls = self._out_cls
        finished = 0
        emitted = 0
        for sim in self._running:
            if sim.every != 1 and (step_no - sim.start_step) % sim.every:
                continue
            batch = batches.get(sim.client_index)
            if batch is None:
                batch = batches[sim.client_index] = ClientBatch()
            n = sim.n_out
            if sim.pooling is not None:  # a pooling request ends in its first step
                finished += self._pooled(sim, batch)
                continue
            if sim.error_after is not None and n >= sim.error_after:
                batch.outputs.append(self._error_output(sim))
                self._drop(sim)
                finished += 1
                continue
            tok = sim.next_token()
            n += 1
            sim.n_out = n
            emitted += 1
            if tok == sim.eos:
                reason, stop_reason = _STOP, None
            elif sim.stop_ids is not None and tok in sim.stop_ids:
                reason, stop_reason = _STOP, tok
            elif n >= sim.limit:
                reason, stop_reason = _LENGTH, None
            else:
                reason = None
            if n == 1 or sim.logprobs_k is not None or (reason is not None and sim.kv_answer):
                out = self._rich_output(sim, tok, reason, stop_reason if reason is not None else None, now, batch)
            elif reason is None:
                out = out_cls(sim.request_id, [tok])
            else:
                out = out_cls(sim.request_id, [tok], None, None, None, reason, stop_reason)
            batch.outputs.append(out)
            if reason is not None:
                self._drop(sim)
                finished += 1
        self._kv_tokens += emitted
        if finished:
            self._running = [r for r in self._running if not r.done]
        return batches, finished

    def _pooled(self, sim: SimRequest, batch: ClientBatch) -> int:
        """Finish a pooling request with its one output (``engine.sim.pooling``)."""
        batch.outputs.append(pooled_output(self._out_cls, sim, batch.aux_frames))
        self.first_tokens += 1
        self._drop(sim)
        return 1

    def _drop(self, sim: SimRequest) -> None:
        del self._reqs[sim.request_id]
        self._finish(sim)

    def _rich_output(
        self, sim: SimRequest, tok: int, reason: int | None, stop_reason: int | None, now: float, batch: ClientBatch
    ) -> EngineCoreOutput032:
        """An output with extras: first-token fields and/or logprobs (off the common path)."""
        kwargs: dict = {}
        if sim.n_out == 1:
            self.first_tokens += 1
            kwargs["prefill_stats"] = PrefillStats(sim.prompt_len, sim.prompt_len)
            if self._stats_on:
                kwargs["events"] = [
                    EngineCoreEvent(_QUEUED, sim.queued_at),
                    EngineCoreEvent(_SCHEDULED, now),
                ]
            if sim.prompt_logprobs_k is not None:
                kwargs["new_prompt_logprobs_tensors"] = sim.prompt_logprobs(batch.aux_frames)
        if sim.logprobs_k is not None:
            kwargs["new_logprobs"] = sim.sample_logprobs(tok, batch.aux_frames)
        if reason is not None and sim.kv_answer is not None:
            kwargs["kv_transfer_params"] = sim.kv_answer
        return self._out_cls(
            sim.request_id, [tok], finish_reason=reason, stop_reason=stop_reason, **kwargs
        )

    def _error_output(self, sim: SimRequest) -> EngineCoreOutput032:
        if self._out_cls is EngineCoreOutput:
            code = sim.error_code or "sim_error"
            return EngineCoreOutput(
                sim.request_id,
                [],
                finish_reason=_ERROR,
                error={"code": code, "message": f"simulated request failure ({code})",
                       "retryable": code == "engine_paused"},
            )
        return self._out_cls(sim.request_id, [], None, None, None, _ERROR)

    def reject_paused(self, request_id: str, client_index: int) -> dict[int, ClientBatch]:
        """0.33's answer to an ADD while ``pause_generation`` holds: a retryable ERROR."""
        error = {"code": "engine_paused",
                 "message": "Generation is paused. Please retry after it resumes.",
                 "retryable": True}
        output = EngineCoreOutput(request_id, [], finish_reason=_ERROR, error=error)
        return {client_index: ClientBatch(outputs=[output], finished_requests=[request_id])}

    # ------------------------------------------------------------- stats

    def stats(self) -> SchedulerStats:
        """The complete stats map for the step that just ran."""
        requests, queries = self._admitted
        self._admitted = (0, 0)
        return SchedulerStats(
            num_running_reqs=len(self._running),
            num_waiting_reqs=len(self._waiting) + len(self._held),
            kv_cache_usage=min(1.0, max(0, self._kv_tokens) / self._kv_capacity),
            prefix_cache_stats=PrefixCacheStats(requests=requests, queries=queries),
        )
