"""Output-side wire structs: EngineCoreOutputs and everything nested in it (docs/engine-protocol.md §4).

Owns the msgspec shapes the engine pushes to the frontend: per-step batches,
per-request deltas, utility replies, scheduler stats, request events and the
logprob containers, plus ``FinishReason`` and the logprob-to-Python helper.
``codec`` decodes/encodes these; the engine client demultiplexes them; the
simulator builds them.

Runs on: any thread (pure data definitions and pure functions).

Design: logprob arrays stay as raw ``[dtype, shape, data]`` triples inside
``LogprobsLists``/``LogprobsTensors`` so that decoding a step batch is a single
msgspec call with no per-output Python work; a consumer that asked for
logprobs calls ``logprobs_lists_to_python(value, frames)`` for that one output.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Sequence

import msgspec

from engine.protocol.ndarray import ndarray_to_list

__all__ = [
    "EngineCoreEvent",
    "EngineCoreEventType",
    "EngineCoreOutput",
    "EngineCoreOutput032",
    "EngineCoreOutputs",
    "FinishReason",
    "LogprobsLists",
    "LogprobsTensors",
    "PrefillStats",
    "PrefixCacheStats",
    "SchedulerStats",
    "UtilityOutput",
    "finish_reason_str",
    "logprobs_lists_to_python",
]


class FinishReason(IntEnum):
    """``EngineCoreOutput.finish_reason``: an int on the wire, a string in the OpenAI API."""

    STOP = 0
    LENGTH = 1
    ABORT = 2
    ERROR = 3
    REPETITION = 4

    @property
    def openai(self) -> str:
        """The OpenAI ``finish_reason`` string ("stop", "length", ...)."""
        return _FINISH_NAMES[self]


_FINISH_NAMES = ("stop", "length", "abort", "error", "repetition")


def finish_reason_str(value: int) -> str:
    """OpenAI string for a wire ``finish_reason`` int; unknown future values map to "error"."""
    if 0 <= value < len(_FINISH_NAMES):
        return _FINISH_NAMES[value]
    return "error"


class EngineCoreEventType(IntEnum):
    """``EngineCoreEvent.type`` values."""

    QUEUED = 1
    SCHEDULED = 2
    PREEMPTED = 3


class EngineCoreEvent(msgspec.Struct, gc=False):
    """Request lifecycle event (map); sent only when the engine logs stats."""

    type: int
    timestamp: float


class PrefillStats(msgspec.Struct, gc=False):
    """``prefill_stats`` map on a request's first output (sent even without stats)."""

    num_prompt_tokens: int = 0
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0
    num_local_cached_tokens: int = 0
    num_external_cached_tokens: int = 0
    num_cache_creation_tokens: int = 0


class PrefixCacheStats(msgspec.Struct, gc=False):
    """``SchedulerStats.prefix_cache_stats`` map (per-step deltas)."""

    reset: bool = False
    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0
    hits_by_source: dict = msgspec.field(default_factory=dict)


def _kv_fetch_stages() -> dict:
    # The three stages a real 0.32 engine always reports.
    return {"waiting_to_start": 0, "in_progress": 0, "completed_waiting": 0}


class SchedulerStats(msgspec.Struct, gc=False):
    """The complete ``scheduler_stats`` map (docs/engine-protocol.md §4.4).

    Every key is always encoded: vllm-rs 0.33 rejects a partial map and then
    stops reading outputs for good. Decoding fills absent keys with defaults
    and ignores unknown ones. Maps are typed loosely on purpose: one odd value
    must not make a whole step batch undecodable.
    """

    num_running_reqs: int = 0
    num_waiting_reqs: int = 0
    num_skipped_waiting_reqs: int = 0
    num_kv_fetch_reqs_by_stage: dict = msgspec.field(default_factory=_kv_fetch_stages)
    step_counter: int = 0
    current_wave: int = 0
    kv_cache_usage: float = 0.0
    iteration_details: Any = None
    prefix_cache_stats: PrefixCacheStats = msgspec.field(default_factory=PrefixCacheStats)
    connector_prefix_cache_stats: Any = None
    kv_cache_eviction_events: list = msgspec.field(default_factory=list)
    spec_decoding_stats: Any = None
    kv_connector_stats: Any = None
    ec_connector_stats: Any = None
    waiting_lora_adapters: dict = msgspec.field(default_factory=dict)
    running_lora_adapters: dict = msgspec.field(default_factory=dict)
    cudagraph_stats: Any = None
    perf_stats: Any = None


class LogprobsLists(msgspec.Struct, array_like=True, gc=False):
    """``new_logprobs``: three array triples, shapes [P, C], [P, C], [P] (docs/engine-protocol.md §4.5)."""

    logprob_token_ids: Any
    logprobs: Any
    sampled_token_ranks: Any
    cu_num_generated_tokens: list[int] | None = None


class LogprobsTensors(msgspec.Struct, array_like=True, gc=False):
    """``new_prompt_logprobs_tensors``: like LogprobsLists, torch dtype names, 5 elements."""

    logprob_token_ids: Any
    logprobs: Any
    selected_token_ranks: Any
    cu_num_generated_tokens: list[int] | None = None
    cu_num_generated_tokens_tensor: Any = None


class EngineCoreOutput032(msgspec.Struct, array_like=True, gc=False):
    """One request's delta for one step, in the 18-element 0.32 wire shape.

    Only the simulator instantiates this class directly (to look exactly like
    a 0.32 engine); decoders use ``EngineCoreOutput``, which accepts 18 or 19.
    """

    request_id: str
    new_token_ids: list[int]
    new_logprobs: LogprobsLists | None = None
    new_prompt_logprobs_tensors: LogprobsTensors | None = None
    pooling_output: Any = None
    finish_reason: int | None = None
    stop_reason: int | str | None = None
    events: list[EngineCoreEvent] | None = None
    kv_transfer_params: dict | None = None
    ec_transfer_params: dict | None = None
    trace_headers: dict | None = None
    prefill_stats: PrefillStats | None = None
    routed_experts: Any = None
    num_nans_in_logits: int = 0
    mm_cache_miss_hashes: list[str] | None = None
    new_sampling_mask: Any = None
    spec_decode_metrics: dict | None = None
    prompt_token_id_logprobs: Any = None


class EngineCoreOutput(EngineCoreOutput032, gc=False):
    """One request's delta for one step: 0.33's 19 elements (adds ``error``).

    A request is finished exactly when ``finish_reason`` is not None; tokens in
    that same output belong to the result.
    """

    # 0.33: {"code": str, "message": str, "retryable": bool} with finish_reason ERROR.
    error: dict | None = None


class UtilityOutput(msgspec.Struct, array_like=True, gc=False):
    """Reply to a UTILITY call: ``[call_id, failure_message, [type_info, value] | nil]``."""

    call_id: int
    failure_message: str | None = None
    result: Any = None

    @property
    def value(self) -> Any:
        """The call's return value (``result[1]``), or None on failure."""
        result = self.result
        if isinstance(result, (list, tuple)) and len(result) == 2:
            return result[1]
        return None


class EngineCoreOutputs(msgspec.Struct, array_like=True, gc=False):
    """One message on the output socket: a step batch and/or stats and/or a utility reply."""

    engine_index: int = 0
    outputs: list[EngineCoreOutput] = msgspec.field(default_factory=list)
    scheduler_stats: SchedulerStats | None = None
    timestamp: float = 0.0
    utility_output: UtilityOutput | None = None
    # A set on the engine side: compare as a set.
    finished_requests: list[str] | None = None
    wave_complete: int | None = None
    start_wave: int | None = None
    weight_version: str | None = None


def logprobs_lists_to_python(
    value: LogprobsLists | LogprobsTensors | Sequence[Any], frames: Sequence[Any] | None = None
) -> tuple[list[list[int]], list[list[float]], list[int]]:
    """Decode ``new_logprobs`` or ``new_prompt_logprobs_tensors`` into plain lists.

    Args:
        value: the struct (or its raw positional list) from a decoded output.
        frames: the multipart message it came in; aux-frame references index it.

    Returns:
        ``(token_ids, logprobs, ranks)``: token_ids/logprobs are [P][C] (column 0
        is the sampled or actual prompt token, then the top-k in descending
        order), ranks is [P] (rank of column 0's token).
    """
    if isinstance(value, LogprobsLists):
        ids_t, lps_t, ranks_t = value.logprob_token_ids, value.logprobs, value.sampled_token_ranks
    elif isinstance(value, LogprobsTensors):
        ids_t, lps_t, ranks_t = value.logprob_token_ids, value.logprobs, value.selected_token_ranks
    else:
        ids_t, lps_t, ranks_t = value[0], value[1], value[2]
    return (
        ndarray_to_list(ids_t, frames),
        ndarray_to_list(lps_t, frames),
        ndarray_to_list(ranks_t, frames),
    )
