"""Finished requests, recorded as vLLM's frontend records them.

When every choice of an HTTP request has finished (the engine's finish, a stop string the
frontend found, the length limit) the HTTP hub records, per engine request: the success counter
by finish reason, end-to-end latency, the queue, prefill, decode and inference phases (from the
engine's event timestamps the engine-I/O thread put into its ``RequestTiming``), time per output
token, prompt and generated token counts, prefill KV tokens computed, preemptions and the
``max_tokens`` parameter; per prompt, ``n`` and the largest generation of its samples. Requests
the client abandoned, or that failed, are not counted, as in vLLM.

Owning thread: the HTTP hub (``record``; the hub's ``Batch`` is flushed by ``Metrics``).

Runs on: the HTTP hub.
"""
from __future__ import annotations

from typing import Any, Iterable

import msgspec

from runtime.metrics.families import FINISHED_REASONS
from runtime.metrics.local import Batch, PerEngine

_PER_REQUEST = {
    "e2e": "vllm:e2e_request_latency_seconds",
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "inference": "vllm:request_inference_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "prompt": "vllm:request_prompt_tokens",
    "generation": "vllm:request_generation_tokens",
    "kv_computed": "vllm:request_prefill_kv_computed_tokens",
    "preemptions": "vllm:request_num_preemptions",
    "max_tokens": "vllm:request_params_max_tokens",
    "n": "vllm:request_params_n",
    "max_generation": "vllm:request_max_num_generation_tokens",
}


class _Engine:
    def __init__(self, families: Any, labels: tuple[str, str], batch: Batch) -> None:
        for key, name in _PER_REQUEST.items():
            setattr(self, key, batch.histogram(families[name].labels(*labels)))
        self.success = {reason: batch.counter(
            families["vllm:request_success"].labels(*labels, reason)) for reason in
            FINISHED_REASONS}


class FinishedRequest(msgspec.Struct, frozen=True):
    """What ``record`` needs of one engine request: its finish reason, prompt length,
    ``max_tokens``, engine rank, timing, and which prompt of the HTTP request it samples."""

    finish_reason: str
    prompt_len: int
    max_tokens: int | None
    rank: int
    timing: Any
    prompt_index: int = 0


class FinishedRequestRecorder:
    """Records finished requests into the per-engine series (HTTP hub)."""

    def __init__(self, families: Any, model_name: str, batch: Batch) -> None:
        self._engines = PerEngine(lambda labels, b: _Engine(families, labels, b), model_name,
                                  batch)
        self.totals = [0, 0]  # prompt, generation tokens of finished requests (the log line)

    def record(self, requests: list[FinishedRequest], n: int) -> None:
        """One HTTP request's engine requests, all finished; ``n`` samples per prompt."""
        largest: dict[int, tuple[int, int]] = {}  # prompt index -> (rank, largest generation)
        for request in requests:
            timing = request.timing
            if timing is None:
                continue
            engine = self._engines[request.rank]
            self._one(engine, request, timing)
            best = largest.get(request.prompt_index)
            if best is None or timing.generated > best[1]:
                largest[request.prompt_index] = (request.rank, timing.generated)
        for rank, generated in largest.values():
            engine = self._engines[rank]
            engine.n.observe(n)
            engine.max_generation.observe(generated)

    def _one(self, engine: _Engine, request: FinishedRequest, timing: Any) -> None:
        success = engine.success.get(request.finish_reason)
        if success is not None:
            success.inc()
        decode = timing.last_token - timing.first_token
        engine.e2e.observe(timing.last_wall - timing.arrival)
        engine.queue.observe(timing.scheduled - timing.queued)
        engine.prefill.observe(timing.first_token - timing.scheduled)
        engine.inference.observe(timing.last_token - timing.scheduled)
        engine.decode.observe(decode)
        engine.tpot.observe(decode / (timing.generated - 1) if timing.generated > 1 else 0)
        engine.prompt.observe(request.prompt_len)
        engine.generation.observe(timing.generated)
        engine.kv_computed.observe(request.prompt_len - max(timing.cached_tokens, 0))
        engine.preemptions.observe(timing.preemptions)
        if request.max_tokens:
            engine.max_tokens.observe(request.max_tokens)
        self.totals[0] += request.prompt_len
        self.totals[1] += timing.generated


def finished_requests(prepared: Any, streams: Iterable[Any], choices: Iterable[Any]
                      ) -> list[FinishedRequest]:
    """The ``FinishedRequest`` of each choice of a prepared request (streams and output-state
    choices in the same order)."""
    return [FinishedRequest(choice.finish_reason or "stop", len(prep.prompt_token_ids),
                            prep.sampling_params.max_tokens, stream.engine_rank, stream.timing,
                            prep.prompt_index)
            for prep, stream, choice in zip(prepared.choices, streams, choices)]
