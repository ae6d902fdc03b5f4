"""Request-side wire structs: SamplingParams, EngineCoreRequest, LoRARequest, type bytes.

Owns the msgspec shapes of everything the frontend sends to an engine core
(docs/engine-protocol.md §3). greenfront's request conversion builds these; ``codec`` encodes them;
the simulator decodes them.

Runs on: any thread (pure data definitions).

Wire facts encoded here:
* ``SamplingParams`` is a msgpack *map* with ``omit_defaults`` so only non-default
  keys travel; private engine fields keep their leading underscore on the wire
  (``_eos_token_id`` ...) but are plain attributes in Python.
* ``EngineCoreRequest`` is a positional array of 22; the first 9 are required,
  so a decoder accepts 9..22 elements (msgspec ignores extra trailing ones).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any

import msgspec

__all__ = [
    "EngineCoreRequest",
    "LoRARequest",
    "OutputKind",
    "PoolingParams",
    "RequestType",
    "SamplingParams",
]


class RequestType:
    """The one-byte frame that follows the identity on the request socket (docs/engine-protocol.md §3.1)."""

    ADD = b"\x00"
    ABORT = b"\x01"
    START_DP_WAVE = b"\x02"
    UTILITY = b"\x03"


class OutputKind(IntEnum):
    """``SamplingParams.output_kind``: frontend-side streaming shape."""

    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


class LoRARequest(msgspec.Struct, array_like=True, gc=False):
    """A LoRA adapter reference; positional array on the wire (docs/engine-protocol.md §3.6)."""

    lora_name: str
    lora_int_id: int
    lora_path: str = ""
    base_model_name: str | None = None
    load_inplace: bool = False
    is_3d_lora_weight: bool = False


#: Below this temperature vLLM samples greedily (its ``_SAMPLING_EPS``).
GREEDY_EPSILON = 1e-5
#: vLLM raises a temperature above 0 but below this to it (SamplingParams' ``__post_init__``).
MIN_TEMPERATURE = 0.01


class SamplingParams(msgspec.Struct, omit_defaults=True, gc=False):
    """Sampling parameters exactly as the engine decodes them (docs/engine-protocol.md §3.3, 43 keys).

    Declaration order is the wire key order. Defaults equal vLLM's, so
    ``omit_defaults`` yields the same map vLLM's own encoder produces for the
    same non-default values.

    NOTE: msgspec's ``omit_defaults`` compares by *identity* (plus "empty" for
    factory defaults), so a freshly computed ``1.0`` for ``top_p`` is still sent.
    That is legal (vllm-rs sends every sampling default explicitly); only leave
    a field unset when you want it omitted. Give float fields Python floats.
    """

    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    watermarking: bool | None = None
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    # NOTE: always send max_tokens explicitly; absent means 16, nil fails the request.
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    prompt_logprob_token_ids: Any = None
    prompt_logprob_start: int | None = None
    logprob_token_ids: list[int] | None = None
    flat_logprobs: bool = False
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    # Plain 0, not OutputKind.CUMULATIVE: omit_defaults compares by identity.
    output_kind: int = 0
    stream_interval: int | None = None
    skip_clone: bool = False
    output_text_buffer_length: int = 0
    # The engine's only EOS source: omit it (None) to ignore EOS.
    eos_token_id: int | None = msgspec.field(default=None, name="_eos_token_id")
    # A Python set on vLLM's side: element order on the wire is arbitrary.
    all_stop_token_ids: list[int] = msgspec.field(
        default_factory=list, name="_all_stop_token_ids"
    )
    watermarking_skipped: bool = msgspec.field(default=False, name="_watermarking_skipped")
    structured_outputs: dict | None = None
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    extra_args: dict[str, Any] | None = None
    bad_words: list[str] | None = None
    bad_words_token_ids: list[list[int]] | None = msgspec.field(
        default=None, name="_bad_words_token_ids"
    )
    skip_reading_prefix_cache: bool | None = None
    thinking_token_budget: int | None = None
    repetition_detection: dict | None = None
    routed_experts_prompt_start: int = 0
    trace_decode_token_ids: list[int] | None = None


class PoolingParams(msgspec.Struct, array_like=True, gc=False):
    """A pooling request's parameters (ADD index 4; docs/pooling.md §3): a positional array of
    10, sent in full with the defaults resolved by the frontend, as vLLM 0.32's sends it."""

    use_activation: bool | None = None
    dimensions: int | None = None
    step_tag_id: int | None = None
    returned_token_ids: list[int] | None = None
    task: str | None = None
    requires_token_ids: bool = False
    skip_reading_prefix_cache: bool | None = None
    late_interaction_params: Any = None
    extra_kwargs: dict[str, Any] | None = None
    output_kind: int = 2  # FINAL_ONLY: the only kind a pooling request may have


#: A prompt token id as an engine can hold it (int32, not negative). Checked while decoding, in
#: C: a Python min()/max() over an 82k-token prompt cost the simulator ~2 ms per ADD.
TokenId = Annotated[int, msgspec.Meta(ge=0, lt=2**31)]


class EngineCoreRequest(msgspec.Struct, array_like=True, gc=False):
    """One ADD payload: a positional array of 22 (docs/engine-protocol.md §3.2).

    The first nine fields have no default, mirroring the engine's decoder,
    which rejects shorter arrays. msgspec always encodes all 22 elements.
    """

    request_id: str
    prompt_token_ids: list[TokenId] | None
    mm_features: Any
    sampling_params: SamplingParams | None
    pooling_params: PoolingParams | None
    arrival_time: float
    lora_request: LoRARequest | None
    cache_salt: str | None
    data_parallel_rank: int | None
    prompt_embeds: Any = None
    prompt_is_token_ids: list[bool] | None = None
    client_index: int = 0
    current_wave: int = 0
    priority: int = 0
    trace_headers: dict[str, str] | None = None
    resumable: bool = False
    external_req_id: str | None = None
    reasoning_ended: bool | None = None
    reasoning_parser_kwargs: dict | None = None
    abort_immediately: bool = False
    session_id: str | None = None
    kv_hints: Any = None
