"""/inference/v1/generate request fields: names, lax types and defaults, in vLLM 0.32's order.

Data only (plus three small validators for types the shared combinators lack). The request is
vLLM's ``GenerateRequest``; its ``sampling_params`` object is a ``SamplingParams`` taken field
for field (its dataclass defaults, not the OpenAI endpoints' generation-config defaults).
``validate.parse_request`` runs the tables into ``GenerateRequest`` and ``GenerateSampling``.

Runs on: request pool threads (pure data).
"""
from __future__ import annotations

from typing import Any

import msgspec

from resources.common.fields import (INVALID, MISSING, Field, Validator, add_error, described,
                                     schema_of, v_any, v_bool, v_dict, v_float, v_int,
                                     v_int_list, v_list, v_literal, v_nullable, v_str, v_union,
                                     with_schema)
from resources.common.sampling import INT64, v_stream_options

OUTPUT_MODES = ("tokens", "text")
#: SamplingParams.max_tokens when the request does not name it (the server replaces it).
DATACLASS_MAX_TOKENS = 16


def v_token_ids() -> Validator:
    """``list[int]`` with at least one item, then vLLM's "no negative ids" field validator."""
    items = v_int_list()

    def check(value: Any, loc: tuple, errors: list) -> Any:
        out = items(value, loc, errors)
        if out is INVALID:
            return INVALID
        if not out:
            return add_error(errors, "too_short", loc, "List should have at least 1 item after "
                             "validation, not 0", value, {"field_type": "List", "min_length": 1,
                                                          "actual_length": 0})
        if min(out) < 0:
            message = "token_ids must not contain negative values"
            return add_error(errors, "value_error", loc, f"Value error, {message}", value,
                             {"error": ValueError(message)})
        return out
    return with_schema(described(check, "list", item=v_int(ge=0), min_length=1, max_length=None),
                       {"type": "array", "items": {"type": "integer", "minimum": 0},
                        "minItems": 1})


def v_int_enum(*choices: int) -> Validator:
    """An ``IntEnum``-typed field (``output_kind``): one of ``choices``."""
    shown = ", ".join(str(c) for c in choices[:-1]) + f" or {choices[-1]}"

    def check(value: Any, loc: tuple, errors: list) -> Any:
        if type(value) is int and value in choices:
            return value
        return add_error(errors, "enum", loc, f"Input should be {shown}", value,
                         {"expected": shown})
    return with_schema(described(check, "literal", choices=choices),
                       {"type": "integer", "enum": list(choices)})


def v_int_keyed(item: Validator) -> Validator:
    """``dict[int, X]``: JSON's string keys parsed as integers (``logit_bias``)."""
    key = v_int()

    def check(value: Any, loc: tuple, errors: list) -> Any:
        if not isinstance(value, dict):
            return add_error(errors, "dict_type", loc, "Input should be a valid dictionary", value)
        before = len(errors)
        out = {}
        for k, v in value.items():
            parsed = key(k, loc + (k,), errors)
            out[parsed] = item(v, loc + (k,), errors)
        return INVALID if len(errors) != before else out
    return with_schema(described(check, "dict", item=item, int_keys=True),
                       {"type": "object", "propertyNames": {"pattern": r"^-?\d+$"},
                        "additionalProperties": schema_of(item)})


#: GenerateRequest fields before ``sampling_params`` (validated first, errors listed first).
HEAD: list[Field] = [
    ("request_id", v_str(), None),
    ("token_ids", v_token_ids(), MISSING),
    # NOTE: informational (offsets into the text /render tokenized); vLLM does not use them.
    ("token_offsets", v_any(), None),
    ("features", v_any(), None),
    ("content_parts", v_nullable(v_list(v_dict())), None),
]

#: GenerateRequest fields after ``sampling_params``.
TAIL: list[Field] = [
    ("model", v_nullable(v_str()), None),
    ("reasoning_ended", v_nullable(v_bool()), None),
    ("reasoning_parser_kwargs", v_nullable(v_dict()), None),
    ("return_token_ids", v_nullable(v_bool()), None),
    ("output_mode", v_literal(*OUTPUT_MODES), "tokens"),
    ("stream", v_nullable(v_bool()), False),
    ("stream_options", v_nullable(v_stream_options()), None),
    ("cache_salt", v_nullable(v_str(min_length=1, max_length=1024)), None),
    ("priority", v_int(**INT64), 0),
    ("kv_transfer_params", v_nullable(v_dict()), None),
    ("ec_transfer_params", v_nullable(v_dict()), None),
]

#: SamplingParams' public fields, in declaration order, with the dataclass defaults.
SAMPLING: list[Field] = [
    ("n", v_int(), 1),
    ("presence_penalty", v_float(), 0.0),
    ("frequency_penalty", v_float(), 0.0),
    ("repetition_penalty", v_float(), 1.0),
    ("temperature", v_float(), 1.0),
    ("watermarking", v_nullable(v_bool()), None),
    ("top_p", v_float(), 1.0),
    ("top_k", v_int(), 0),
    ("min_p", v_float(), 0.0),
    ("seed", v_nullable(v_int()), None),
    ("stop", v_nullable(v_union(v_str(), v_list(v_str()))), None),
    ("stop_token_ids", v_nullable(v_int_list()), None),
    ("ignore_eos", v_bool(), False),
    ("max_tokens", v_nullable(v_int()), DATACLASS_MAX_TOKENS),
    ("min_tokens", v_int(), 0),
    ("logprobs", v_nullable(v_int()), None),
    ("prompt_logprobs", v_nullable(v_int()), None),
    ("prompt_logprob_token_ids", v_any(), None),
    ("prompt_logprob_start", v_nullable(v_int()), None),
    ("logprob_token_ids", v_nullable(v_int_list()), None),
    ("flat_logprobs", v_bool(), False),
    ("detokenize", v_bool(), True),
    ("skip_special_tokens", v_bool(), True),
    ("spaces_between_special_tokens", v_bool(), True),
    ("include_stop_str_in_output", v_bool(), False),
    ("output_kind", v_int_enum(0, 1, 2), 0),
    ("stream_interval", v_nullable(v_int()), None),
    ("skip_clone", v_bool(), False),
    ("output_text_buffer_length", v_int(), 0),
    ("structured_outputs", v_nullable(v_dict()), None),
    ("logit_bias", v_nullable(v_int_keyed(v_float())), None),
    ("allowed_token_ids", v_nullable(v_int_list()), None),
    ("extra_args", v_nullable(v_dict()), None),
    ("bad_words", v_nullable(v_list(v_str())), None),
    ("skip_reading_prefix_cache", v_nullable(v_bool()), None),
    ("thinking_token_budget", v_nullable(v_int()), None),
    ("repetition_detection", v_nullable(v_dict()), None),
    ("routed_experts_prompt_start", v_int(), 0),
    ("trace_decode_token_ids", v_nullable(v_int_list()), None),
]


class GenerateRequest(msgspec.Struct, kw_only=True, frozen=True):
    """An /inference/v1/generate request's own fields (``HEAD`` and ``TAIL``), typed."""

    request_id: str | None
    token_ids: list[int]
    token_offsets: Any
    features: Any
    content_parts: list[dict[str, Any]] | None
    model: str | None
    reasoning_ended: bool | None
    reasoning_parser_kwargs: dict[str, Any] | None
    return_token_ids: bool | None
    output_mode: str
    stream: bool | None
    stream_options: dict[str, bool | None] | None
    cache_salt: str | None
    priority: int
    kv_transfer_params: dict[str, Any] | None
    ec_transfer_params: dict[str, Any] | None


class GenerateSampling(msgspec.Struct, kw_only=True):
    """Its ``sampling_params`` (``SAMPLING``), typed, with SamplingParams' defaults filled in;
    mutable, as ``validate.construct_sampling`` normalizes it the way SamplingParams'
    ``__post_init__`` does."""

    n: int
    presence_penalty: float
    frequency_penalty: float
    repetition_penalty: float
    temperature: float
    watermarking: bool | None
    top_p: float
    top_k: int
    min_p: float
    seed: int | None
    stop: str | list[str] | None
    stop_token_ids: list[int] | None
    ignore_eos: bool
    max_tokens: int | None
    min_tokens: int
    logprobs: int | None
    prompt_logprobs: int | None
    prompt_logprob_token_ids: Any
    prompt_logprob_start: int | None
    logprob_token_ids: list[int] | None
    flat_logprobs: bool
    detokenize: bool
    skip_special_tokens: bool
    spaces_between_special_tokens: bool
    include_stop_str_in_output: bool
    output_kind: int
    stream_interval: int | None
    skip_clone: bool
    output_text_buffer_length: int
    structured_outputs: dict[str, Any] | None
    logit_bias: dict[int, float] | None
    allowed_token_ids: list[int] | None
    extra_args: dict[str, Any] | None
    bad_words: list[str] | None
    skip_reading_prefix_cache: bool | None
    thinking_token_budget: int | None
    repetition_detection: dict[str, Any] | None
    routed_experts_prompt_start: int
    trace_decode_token_ids: list[int] | None

    # What the shared SamplingParams builder (``resources.common.sampling``) reads of the OpenAI
    # endpoints' requests and SamplingParams has no field for: none here (``convert`` adds the
    # transfer parameters to ``extra_args`` itself).
    @property
    def vllm_xargs(self) -> None:
        return None

    @property
    def kv_transfer_params(self) -> None:
        return None

    @property
    def response_format(self) -> None:
        return None
