"""/inference/v1/generate checks, in the order vLLM 0.32 runs them, with its wording.

vLLM validates ``GenerateRequest`` with pydantic: the cache-salt "before" validator, then the
fields in declaration order, ``sampling_params`` being built into a ``SamplingParams`` on the
spot (its ``__post_init__`` checks raise at once, discarding field errors already collected),
then the "after" validators. The serving layer and the engine client add their checks later
(``check_request``, ``default_max_tokens``, ``check_prompt_length``).

Called by: ``resources.generate.convert``.
Runs on: request pool threads (pure functions).
"""
from __future__ import annotations

from typing import Any

import msgspec

from base.errors import InvalidRequest
from runtime.serving_context import ServingContext
from resources.common.fields import add_error, collect_fields, validation_error
from resources.common.newer_fields import refuse_derender
from resources.common.sampling import max_tokens_for
from resources.common.sampling_rules import (check_thinking_token_budget, settle_like_vllm,
                                             unsupported)
from resources.generate import types

_MAX_CACHE_SALT = 128
_CACHE_SALT_FORBIDDEN = frozenset("@/\\\x00")
_MM_KEYS = ("mm_hashes", "mm_placeholders", "kwargs_data", "mm_metadata")


def check_raw(body: dict) -> None:
    """The model-level "before" validator: ``cache_salt`` (vLLM's ``validate_cache_salt``);
    0.33's derender mode refused."""
    refuse_derender(body)
    salt = body.get("cache_salt")
    if salt is None:
        return
    if not isinstance(salt, str) or not salt:
        raise InvalidRequest("Parameter 'cache_salt' must be a non-empty string if provided.",
                             param="cache_salt")
    if len(salt) > _MAX_CACHE_SALT or any(c in _CACHE_SALT_FORBIDDEN for c in salt):
        raise InvalidRequest("Parameter 'cache_salt' must be at most 128 characters and must not "
                             "contain '@', '/', '\\\\', or NUL.", param="cache_salt")


def parse_request(body: dict, ctx: ServingContext
                  ) -> tuple[types.GenerateRequest, types.GenerateSampling, frozenset]:
    """Field types, the SamplingParams constructor checks and the "after" validators.

    Returns:
        (request fields, sampling fields with SamplingParams defaults filled in, the names the
        request's ``sampling_params`` object set).

    Raises:
        RequestValidationError: field type errors, all of them (pydantic's "Bad Request").
        InvalidRequest: a SamplingParams check (it wins over any type error, as in vLLM).
    """
    errors: list = []
    head, head_errors = collect_fields(body, types.HEAD)
    errors.extend(head_errors)
    sampling, provided = _parse_sampling(body, ctx, errors)
    tail, tail_errors = collect_fields(body, types.TAIL)
    errors.extend(tail_errors)
    if errors:
        raise validation_error(errors)
    fields = types.GenerateRequest(**head, **tail)
    _check_after(body, fields, sampling)
    return fields, sampling, provided


def _parse_sampling(body: dict, ctx: ServingContext, errors: list
                    ) -> tuple[types.GenerateSampling | None, frozenset]:
    """``sampling_params``: pydantic's union "SamplingParams instance | typed dict" (None
    when it has errors, which are added to ``errors``)."""
    loc = ("body", "sampling_params")
    if "sampling_params" not in body:
        add_error(errors, "missing", loc, "Field required", body)
        return None, frozenset()
    value = body["sampling_params"]
    if not isinstance(value, dict):
        _not_an_instance(errors, loc, value)
        add_error(errors, "dict_type", loc, "Input should be a valid dictionary", value)
        return None, frozenset()
    mine: list = []
    out: dict[str, Any] = {}
    for name, validator, default in types.SAMPLING:
        out[name] = validator(value[name], loc + (name,), mine) if name in value else default
    if mine:
        _not_an_instance(errors, loc, value)
        errors.extend(mine)
        return None, frozenset()
    return construct_sampling(types.GenerateSampling(**out), ctx), frozenset(value)


def _not_an_instance(errors: list, loc: tuple, value: Any) -> None:
    add_error(errors, "is_instance_of", loc, "Input should be an instance of SamplingParams",
              value, {"class": "SamplingParams"})


def construct_sampling(sp: types.GenerateSampling, ctx: ServingContext
                       ) -> types.GenerateSampling:
    """SamplingParams' ``__post_init__`` on ``sp`` (in place): normalizations, then its checks
    in order.

    Raises:
        InvalidRequest: the first failing check, worded as vLLM words it.
    """
    if sp.seed == -1:
        sp.seed = None
    budget = sp.thinking_token_budget
    check_thinking_token_budget(budget)
    if budget == -1:
        sp.thinking_token_budget = None
    stop = sp.stop
    sp.stop = [] if stop is None else [stop] if isinstance(stop, str) else stop
    sp.stop_token_ids = list(dict.fromkeys(sp.stop_token_ids or ()))
    sp.bad_words = list(dict.fromkeys(sp.bad_words or ()))
    settle_like_vllm(sp, sp.n, ctx)
    return sp


def _check_after(body: dict, fields: types.GenerateRequest,
                 sampling: types.GenerateSampling) -> None:
    """GenerateRequest's "after" validators (pydantic ``value_error`` at ``body``)."""
    message = None
    if fields.content_parts and fields.features:
        message = "content_parts and features are mutually exclusive"
    elif fields.output_mode != "tokens" and not sampling.detokenize:
        message = (f"output_mode={fields.output_mode!r} requires sampling_params.detokenize "
                   "to be true")
    if message is not None:
        errors: list = []
        add_error(errors, "value_error", ("body",), f"Value error, {message}", body,
                  {"error": ValueError(message)})
        raise validation_error(errors)


def check_request(fields: types.GenerateRequest, sampling: types.GenerateSampling, *,
                  tokens_only: bool = False) -> None:
    """The serving layer's refusals before the prompt is looked at, then greenfront's own.

    Raises:
        InvalidRequest: vLLM's messages; for what greenfront does not build (multimodal input,
            reasoning hand-over, prompt-token scoring, trace replay), a clear refusal.
    """
    if fields.stream and sampling.prompt_logprob_token_ids is not None:
        raise InvalidRequest("prompt_logprob_token_ids are not available when stream=true.")
    if tokens_only:
        check_tokens_only(fields, sampling)
    try:
        msgspec.msgpack.encode((sampling, fields.kv_transfer_params,
                                fields.ec_transfer_params))
    except (OverflowError, TypeError, ValueError) as exc:
        raise InvalidRequest(str(exc)) from None
    if fields.content_parts:
        raise unsupported("content_parts (multimodal input)", "content_parts")
    if _has_mm_items(fields.features):
        raise unsupported("features (multimodal input)", "features")
    for name in ("reasoning_ended", "reasoning_parser_kwargs"):
        if getattr(fields, name) is not None:
            raise unsupported(name, name)
    for name in ("prompt_logprob_token_ids", "trace_decode_token_ids"):
        if getattr(sampling, name) is not None:
            raise unsupported(f"sampling_params.{name}", name)


def check_tokens_only(fields: types.GenerateRequest, sampling: types.GenerateSampling) -> None:
    """``--tokens-only``: what needs text, refused as vLLM refuses it without a tokenizer.

    ``bad_words`` is greenfront's own refusal: vLLM, with no tokenizer to turn the words into
    ids, drops them and answers 200 (``docs/parity.md`` §9).
    """
    if sampling.stop:
        raise InvalidRequest("stop strings are not supported on a --tokens-only server because "
                             "detokenization is disabled. Check stop strings on the "
                             "coordinator, or use stop_token_ids.")
    if fields.output_mode != "tokens":
        raise InvalidRequest(f"output_mode={fields.output_mode!r} requires a tokenizer, but "
                             "this server does not load one (--tokens-only or "
                             "--skip-tokenizer-init). Send the request to a server that loads "
                             "a tokenizer, or use output_mode='tokens'.")
    if sampling.bad_words:
        raise InvalidRequest("bad_words are not supported on a --tokens-only server: without a "
                             "tokenizer they cannot be turned into token ids. Use logit_bias "
                             "or allowed_token_ids.", param="bad_words")


def check_tokens_only_engine_side(sampling: types.GenerateSampling) -> None:
    """``--tokens-only``: the engine client's refusal of structured outputs (the engine cores
    of ``vllm serve --tokens-only`` load no tokenizer to build a grammar with)."""
    if sampling.structured_outputs is not None:
        raise InvalidRequest("Structured outputs requires a tokenizer so it can't be used "
                             "with 'skip_tokenizer_init'")


def _has_mm_items(features: Any) -> bool:
    """Whether ``features`` names any multimodal item (vLLM ignores an empty one)."""
    if features is None:
        return False
    if not isinstance(features, dict):
        return True
    for key in _MM_KEYS:
        groups = features.get(key) or {}
        if not isinstance(groups, dict) or any(groups.values()):
            return True
    return False


def default_max_tokens(ctx: ServingContext, prompt_len: int) -> int:
    """``max_tokens`` when ``sampling_params`` does not name it: the context left, capped by
    the generation config's ``max_new_tokens`` (0 when the prompt fills the context; the
    engine-side prompt check then refuses the request).

    Raises:
        InvalidRequest: the prompt alone exceeds the context (vLLM's ``get_max_tokens`` wording).
    """
    if prompt_len > ctx.max_model_len:
        raise InvalidRequest(f"Input length ({prompt_len}) exceeds model's maximum context "
                             f"length ({ctx.max_model_len}).")
    return max_tokens_for(ctx, None, prompt_len)


def check_prompt_length(ctx: ServingContext, prompt_len: int) -> None:
    """The engine client's decoder-prompt checks (text-only models)."""
    limit = ctx.max_model_len
    if prompt_len > limit:
        raise InvalidRequest(f"The decoder prompt (length {prompt_len}) is longer than the maximum "
                             f"model length of {limit}. Make sure that `max_model_len` is no "
                             "smaller than the number of text tokens.")
    if prompt_len == limit:
        raise InvalidRequest(f"The decoder prompt (length {prompt_len}) plus the number of "
                             "requested output tokens (at least 1) is longer than the maximum "
                             f"model length of {limit}. Make sure that `max_model_len` is no "
                             "smaller than the number of text tokens (prompt + requested output "
                             "tokens).")


def check_routed_experts_start(sampling: types.GenerateSampling, prompt_len: int) -> None:
    start = sampling.routed_experts_prompt_start
    if not 0 <= start <= prompt_len:
        raise InvalidRequest(f"routed_experts_prompt_start must be between 0 and the prompt "
                             f"length ({prompt_len}), inclusive.",
                             param="routed_experts_prompt_start", value=start, show_value=True)


__all__ = ["check_prompt_length", "check_raw", "check_request", "check_routed_experts_start",
           "check_tokens_only", "check_tokens_only_engine_side", "construct_sampling",
           "default_max_tokens", "parse_request"]
