"""Sampling fields shared by completions and chat, and the wire ``SamplingParams`` built from them.

Owns: the field table of the sampling-related request fields (lax types, defaults), the usage
flags of ``stream_options``, the ``max_tokens`` budget of docs/text-parity.md §4.3/§5.2, generation-config
defaults and EOS handling (docs/text-parity.md §5.2, docs/engine-protocol.md §3.3), n > 1 fan-out, and the SamplingParams build: the
checks of ``resources.common.sampling_rules`` (vLLM's order and wording), then
``engine.protocol.validate_sampling_params`` as the last guard before the wire.

Called by: ``resources.completions.convert`` and ``resources.chat.convert``.
Runs on: request pool threads.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Protocol

import msgspec

from engine.protocol import (OutputKind, SamplingParams, SamplingParamsError,
                             validate_sampling_params)
from base.errors import InvalidRequest
from runtime.serving_context import ServingContext
from resources.common.fields import (INVALID, SLOW, Field, Validator, add_error, described,
                                     fields_schema, v_bool, v_dict, v_float, v_int, v_int_list,
                                     v_list, v_literal, v_nullable, v_str, v_union,
                                     with_fast_path, with_schema)
from resources.common.sampling_rules import (SamplingValues, bad_words_token_ids,
                                             check_engine_side, settle_like_vllm,
                                             convert_logit_bias, plain_error,
                                             structured_outputs_for)

__all__ = ["SamplingRequest", "build_sampling_params", "fan_out", "max_tokens_for",
           "plain_error", "sampling_fields", "usage_flags"]

INT64 = {"ge": -(2 ** 63), "le": 2 ** 63 - 1}
# (field, OpenAI default) whose server default may come from generation_config.json (docs/text-parity.md §5.2).
_DEFAULTED = (("repetition_penalty", 1.0), ("presence_penalty", 0.0),
              ("frequency_penalty", 0.0), ("temperature", 1.0), ("top_p", 1.0), ("top_k", 0),
              ("min_p", 0.0))


def v_stream_options() -> Any:
    inner = [("include_usage", v_nullable(v_bool()), False),
             ("continuous_usage_stats", v_nullable(v_bool()), False)]

    def check(value: Any, loc: tuple, errors: list) -> Any:
        if not isinstance(value, dict):
            return add_error(errors, "model_type", loc, "Input should be a valid dictionary or "
                             "instance of StreamOptions", value, {"class_name": "StreamOptions"})
        before = len(errors)
        out = {}
        for name, validator, default in inner:
            out[name] = validator(value[name], loc + (name,), errors) if name in value else default
        return INVALID if len(errors) != before else out
    return with_schema(described(check, "object", fields=inner),
                       fields_schema(inner, "StreamOptions"))


def _xarg_value() -> Validator:
    """A ``vllm_xargs`` value: vLLM's ``str | int | float | list[str | int | float]``."""
    def fast(value: Any) -> Any:
        # PERF: a str, a plain int, or a list of them, is what the union returns unchanged (a
        # list copied); the union tries str first, so each int of a list built and dropped a
        # str error: a 53-id list (the bench's scripted sim_tokens) took half of prepare_chat's
        # CPU (~190 of 380 us per request).
        kind = type(value)
        if kind is str or kind is int:
            return value
        if kind is list and all(type(v) is str or type(v) is int for v in value):
            return list(value)
        return SLOW
    return with_fast_path(
        v_union(v_str(), v_int(), v_float(), v_list(v_union(v_str(), v_int(), v_float()))), fast)


@lru_cache(maxsize=8)
def sampling_fields(max_stop_strings: int) -> list[Field]:
    """The sampling-related fields both endpoints declare, in vLLM's declaration order."""
    scalar = _xarg_value()
    return [
        ("frequency_penalty", v_nullable(v_float()), None),
        ("logit_bias", v_nullable(v_dict(v_float())), None),
        ("presence_penalty", v_nullable(v_float()), None),
        ("seed", v_nullable(v_int(**INT64)), None),
        ("stop", v_nullable(v_union(v_str(), v_list(v_str(), max_length=max_stop_strings))),
         list),
        ("stream", v_nullable(v_bool()), False),
        ("stream_options", v_nullable(v_stream_options()), None),
        ("temperature", v_nullable(v_float()), None),
        ("top_p", v_nullable(v_float()), None),
        ("user", v_nullable(v_str()), None),
        ("use_beam_search", v_bool(), False),
        ("top_k", v_nullable(v_int()), None),
        ("min_p", v_nullable(v_float()), None),
        ("repetition_penalty", v_nullable(v_float()), None),
        ("watermarking", v_nullable(v_bool()), None),
        ("length_penalty", v_float(), 1.0),
        ("stop_token_ids", v_nullable(v_int_list()), list),
        ("include_stop_str_in_output", v_bool(), False),
        ("ignore_eos", v_bool(), False),
        ("min_tokens", v_int(), 0),
        ("skip_special_tokens", v_bool(), True),
        ("spaces_between_special_tokens", v_bool(), True),
        ("truncate_prompt_tokens", v_nullable(v_int(ge=-1, le=INT64["le"])), None),
        ("truncation_side", v_nullable(v_literal("left", "right")), None),
        ("allowed_token_ids", v_nullable(v_int_list()), None),
        ("prompt_logprobs", v_nullable(v_int()), None),
        ("logprob_token_ids", v_nullable(v_int_list()), None),
        ("bad_words", v_list(v_str()), list),
        ("response_format", v_nullable(v_dict()), None),
        ("structured_outputs", v_nullable(v_dict()), None),
        ("priority", v_int(**INT64), 0),
        ("request_id", v_str(), None),
        ("session_id", v_nullable(v_str()), None),
        ("return_tokens_as_token_ids", v_nullable(v_bool()), None),
        ("return_token_ids", v_nullable(v_bool()), None),
        ("cache_salt", v_nullable(v_str(min_length=1, max_length=1024)), None),
        ("kv_transfer_params", v_nullable(v_dict()), None),
        ("vllm_xargs", v_nullable(v_dict(scalar)), None),
        ("repetition_detection", v_nullable(v_dict()), None),
        ("thinking_token_budget", v_nullable(v_int()), None),
        ("stream_interval", v_nullable(v_int(ge=1)), None),
    ]


class SamplingRequest(msgspec.Struct, kw_only=True):
    """The fields of ``sampling_fields``, typed: the part of a completions or chat request the
    SamplingParams are built from (each endpoint's request struct extends it). Filled by
    ``resources.common.fields.parse_struct``; mutable, because the chat output parsers adjust
    a request before its SamplingParams are built (vLLM's ``adjust_request``)."""

    frequency_penalty: float | None
    logit_bias: dict[str, float] | None
    presence_penalty: float | None
    seed: int | None
    stop: str | list[str] | None
    stream: bool | None
    stream_options: dict[str, bool | None] | None
    temperature: float | None
    top_p: float | None
    user: str | None
    use_beam_search: bool
    top_k: int | None
    min_p: float | None
    repetition_penalty: float | None
    watermarking: bool | None
    length_penalty: float
    stop_token_ids: list[int] | None
    include_stop_str_in_output: bool
    ignore_eos: bool
    min_tokens: int
    skip_special_tokens: bool
    spaces_between_special_tokens: bool
    truncate_prompt_tokens: int | None
    truncation_side: str | None
    allowed_token_ids: list[int] | None
    prompt_logprobs: int | None
    logprob_token_ids: list[int] | None
    bad_words: list[str]
    response_format: dict[str, Any] | None
    structured_outputs: dict[str, Any] | None
    priority: int
    request_id: str | None
    session_id: str | None
    return_tokens_as_token_ids: bool | None
    return_token_ids: bool | None
    cache_salt: str | None
    kv_transfer_params: dict[str, Any] | None
    vllm_xargs: dict[str, Any] | None
    repetition_detection: dict[str, Any] | None
    thinking_token_budget: int | None
    stream_interval: int | None


def usage_flags(fields: SamplingRequest, ctx: ServingContext) -> tuple[bool, bool]:
    """(include_usage, continuous_usage) as vLLM decides them for a stream."""
    if ctx.enable_force_include_usage:
        return True, True
    options = fields.stream_options
    if not options:
        return False, False
    include = bool(options["include_usage"])
    return include, include and bool(options["continuous_usage_stats"])


# ---- max_tokens -------------------------------------------------------------------------------

def max_tokens_for(ctx: ServingContext, requested: int | None, prompt_len: int) -> int:
    """min(context left, requested or the generation config's max_new_tokens) (docs/text-parity.md §5.2)."""
    candidates = [ctx.max_model_len - prompt_len]
    fallback = requested if requested is not None else ctx.generation_defaults.get("max_tokens")
    if fallback is not None:
        candidates.append(int(fallback))
    return min(candidates)


# ---- SamplingParams ---------------------------------------------------------------------------

class SamplingSource(Protocol):
    """What ``build_sampling_params`` reads of a request: a ``SamplingRequest`` (completions,
    chat) or /inference/v1/generate's ``GenerateSampling``."""

    temperature: float | None
    top_p: float | None
    top_k: int | None
    min_p: float | None
    presence_penalty: float | None
    frequency_penalty: float | None
    repetition_penalty: float | None
    logit_bias: dict | None
    stop: str | list[str] | None
    stop_token_ids: list[int] | None
    bad_words: list[str] | None
    min_tokens: int
    allowed_token_ids: list[int] | None
    thinking_token_budget: int | None
    ignore_eos: bool
    seed: int | None
    vllm_xargs: dict[str, Any] | None
    kv_transfer_params: dict[str, Any] | None
    include_stop_str_in_output: bool
    watermarking: bool | None
    logprob_token_ids: list[int] | None
    skip_special_tokens: bool
    spaces_between_special_tokens: bool
    stream_interval: int | None
    structured_outputs: dict[str, Any] | None
    response_format: dict[str, Any] | None
    repetition_detection: dict[str, Any] | None


def build_sampling_params(fields: SamplingSource, ctx: ServingContext, *, n: int,
                          max_tokens: int, logprobs: int | None,
                          prompt_logprobs: int | None, stream: bool) -> SamplingParams:
    """The wire SamplingParams for one prompt (n = 1 on the wire; see ``fan_out``).

    Raises:
        InvalidRequest: any check of docs/text-parity.md §8.2 that belongs to sampling.
    """
    knobs: dict[str, float] = {}
    for name, default in _DEFAULTED:
        value = getattr(fields, name)
        if value is None:
            value = ctx.generation_defaults.get(name, default)
        knobs[name] = int(value) if name == "top_k" else float(value)
    stop = fields.stop
    sp = SamplingValues(
        **knobs, max_tokens=max_tokens, min_tokens=fields.min_tokens, logprobs=logprobs,
        prompt_logprobs=prompt_logprobs,
        stop=[] if stop is None else [stop] if isinstance(stop, str) else list(stop),
        stop_token_ids=list(dict.fromkeys(fields.stop_token_ids or ())),
        bad_words=list(dict.fromkeys(fields.bad_words or ())),
        logit_bias=convert_logit_bias(fields.logit_bias),
        allowed_token_ids=fields.allowed_token_ids,
        thinking_token_budget=fields.thinking_token_budget)
    settle_like_vllm(sp, n, ctx)
    check_engine_side(sp, ctx)
    return _to_wire(sp, fields, ctx, stream)


def _to_wire(sp: SamplingValues, fields: SamplingSource, ctx: ServingContext,
             stream: bool) -> SamplingParams:
    ignore_eos = fields.ignore_eos
    # Without a tokenizer (--tokens-only) vLLM knows no EOS id of its own: the generation
    # config's EOS ids are all plain stop ids, so they end a request with a stop_reason.
    tokenizer_eos = None if ctx.tokens_only else ctx.tokenizer.eos_token_id
    all_stop = set(sp.stop_token_ids)
    stop_ids = sp.stop_token_ids
    if tokenizer_eos is not None:
        all_stop.add(tokenizer_eos)
    extra_eos = [e for e in ctx.generation_eos_ids if e != tokenizer_eos]
    if extra_eos:
        all_stop.update(extra_eos)
        if not ignore_eos:
            stop_ids = list(dict.fromkeys([*stop_ids, *extra_eos]))
    seed = fields.seed
    extra_args = dict(fields.vllm_xargs or {})
    if fields.kv_transfer_params:
        extra_args["kv_transfer_params"] = fields.kv_transfer_params
    budget = fields.thinking_token_budget
    include_stop = fields.include_stop_str_in_output
    wire = SamplingParams(
        presence_penalty=sp.presence_penalty, frequency_penalty=sp.frequency_penalty,
        repetition_penalty=sp.repetition_penalty, temperature=sp.temperature,
        watermarking=fields.watermarking, top_p=sp.top_p, top_k=sp.top_k,
        min_p=sp.min_p, seed=None if seed == -1 else seed, stop=sp.stop,
        stop_token_ids=stop_ids, ignore_eos=ignore_eos, max_tokens=sp.max_tokens,
        min_tokens=sp.min_tokens, logprobs=sp.logprobs,
        prompt_logprobs=sp.prompt_logprobs, logprob_token_ids=fields.logprob_token_ids,
        skip_special_tokens=fields.skip_special_tokens,
        spaces_between_special_tokens=fields.spaces_between_special_tokens,
        include_stop_str_in_output=include_stop,
        output_kind=int(OutputKind.DELTA if stream else OutputKind.FINAL_ONLY),
        stream_interval=fields.stream_interval, skip_clone=True,
        output_text_buffer_length=(max(len(s) for s in sp.stop) - 1
                                   if sp.stop and not include_stop else 0),
        eos_token_id=None if ignore_eos else tokenizer_eos,
        all_stop_token_ids=sorted(all_stop),
        structured_outputs=structured_outputs_for(fields, ctx),
        logit_bias=sp.logit_bias, allowed_token_ids=sp.allowed_token_ids,
        extra_args=extra_args or None, bad_words=sp.bad_words,
        bad_words_token_ids=(bad_words_token_ids(ctx.tokenizer, sp.bad_words)
                             if sp.bad_words else None),
        skip_reading_prefix_cache=sp.prompt_logprobs is not None,
        thinking_token_budget=None if budget == -1 else budget,
        repetition_detection=fields.repetition_detection,
    )
    try:
        validate_sampling_params(wire, ctx.tokenizer.vocab_size)
    except SamplingParamsError as exc:
        # NOTE: only reachable for values vLLM would have refused in a way we do not word
        # ourselves; never send what the engine would choke on (docs/engine-protocol.md §3.1).
        raise InvalidRequest(str(exc), param=exc.param) from None
    return wire


def fan_out(sp: SamplingParams, n: int) -> list[SamplingParams]:
    """n wire requests for one prompt: vLLM sends n children with ``seed + i`` (docs/engine-protocol.md §3.2)."""
    if n == 1:
        return [sp]
    if sp.seed is None:
        return [msgspec.structs.replace(sp) for _ in range(n)]
    return [msgspec.structs.replace(sp, seed=sp.seed + i) for i in range(n)]
