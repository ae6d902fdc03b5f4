"""vLLM's SamplingParams rules, restated: the checks in its order and wording, and the
conversions of request fields into wire values.

Owns: which checks carry ``(parameter=…, value=…)`` and which do not (docs/text-parity.md §8.2), the
order vLLM runs them in (constructor checks, greedy reset, then the engine client's vocabulary
and logprobs checks), ``logit_bias`` key conversion and clamping, ``response_format`` /
``structured_outputs`` -> the wire map, and bad-word tokenization.

Called by: ``resources.common.sampling.build_sampling_params``.
Runs on: request pool threads (pure functions).
"""
from __future__ import annotations

import math
from typing import Any, Protocol

import msgspec

from base.errors import InvalidRequest
from engine.protocol.requests import GREEDY_EPSILON, MIN_TEMPERATURE
from runtime.serving_context import ServingContext
from resources.common.structured_outputs import (check_structural_tags, structural_tag_text,
                                                 wire_map)



def plain_error(message: str, param: str | None = None) -> InvalidRequest:
    """A 400 whose ``param`` is set without vLLM's "(parameter=…)" suffix (its
    ``create_error_response(param=…)`` path, e.g. "Echo is unsupported with suffix.")."""
    exc = InvalidRequest(message)
    exc.param = param
    return exc


def unsupported(what: str, param: str) -> InvalidRequest:
    """The 400 for a request field greenfront does not implement."""
    return plain_error(f"{what} is not supported by this server (greenfront).", param)


class Refusable(Protocol):
    """The request fields ``refuse_unimplemented`` looks at (completions and chat requests)."""

    logits_processors: Any


def refuse_unimplemented(f: Refusable) -> None:
    """The serving-layer refusals completions and chat share, in vLLM's check order: prompt
    embeddings (completions only: chat requests have no such field), logits processors."""
    if getattr(f, "prompt_embeds", None) is not None:
        raise unsupported("prompt_embeds", "prompt_embeds")
    if f.logits_processors is not None:
        raise unsupported("logits_processors", "logits_processors")


def check_thinking_token_budget(value: Any) -> None:
    """vLLM's ``thinking_token_budget`` rule, run on the raw value (booleans and floats are
    refused before any integer coercion): a non-negative integer, or -1 for unlimited."""
    if value is None:
        return
    if isinstance(value, (bool, float)) or not isinstance(value, int) or value < -1:
        raise InvalidRequest("`thinking_token_budget` must be a non-negative integer or -1 for "
                             "unlimited.", param="thinking_token_budget", value=value,
                             show_value=True)


def convert_logit_bias(bias: dict | None) -> dict[int, float] | None:
    """String keys to token ids, biases clamped to ±100 (docs/text-parity.md §8.2 wording for bad keys)."""
    if bias is None:
        return None
    out: dict[int, float] = {}
    invalid = []
    for key, value in bias.items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            invalid.append(key)
            continue
        out[token] = min(100.0, max(-100.0, value))
    if invalid:
        raise InvalidRequest("logit_bias contains key(s) that cannot be converted to integer "
                             f"token IDs: {invalid!r}", param="logit_bias", value=invalid,
                             show_value=True)
    return out


class Constrained(Protocol):
    """The request fields a structured-output constraint comes from."""

    structured_outputs: dict[str, Any] | None
    response_format: dict[str, Any] | None


def structured_outputs_for(fields: Constrained, ctx: ServingContext) -> dict | None:
    """``response_format`` / ``structured_outputs`` -> the 11-key wire map, checked, with the
    ``_backend`` the deployment's ``--structured-outputs-config`` selects."""
    params = dict(fields.structured_outputs or {})
    rf = fields.response_format
    kind = rf.get("type") if rf else None
    if kind == "json_object":
        params["json_object"] = True
    elif kind == "json_schema":
        schema = rf.get("json_schema")
        params["json"] = schema.get("schema") if isinstance(schema, dict) else None
    elif kind == "structural_tag":
        params["structural_tag"] = structural_tag_text(rf)
    elif kind not in (None, "text"):
        raise plain_error(f"response_format type {kind!r} is not supported by this server; use "
                          "'text', 'json_object', 'json_schema' or 'structural_tag'.",
                          "response_format")
    if not params:
        return None
    keys = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
    chosen = [k for k in keys if params.get(k) is not None]
    if len(chosen) > 1:
        raise InvalidRequest("You can only use one kind of structured outputs constraint but "
                             f"multiple are specified: {chosen}")
    if not chosen:
        raise InvalidRequest("You must use one kind of structured outputs constraint but none "
                             "are specified")
    return wire_map(params, ctx.structured_outputs_backend)


def bad_words_token_ids(tokenizer: Any, words: list[str]) -> list[list[int]]:
    """Each bad word tokenized as-is and with a leading space (kept when it differs)."""
    out: list[list[int]] = []
    for word in words:
        plain = tokenizer.encode(word.lstrip(), False)
        out.append(plain)
        spaced = tokenizer.encode(" " + word.lstrip(), False)
        if spaced and plain and spaced[0] != plain[0] and len(spaced) == len(plain):
            out.append(spaced)
    return out


class SamplingValues(msgspec.Struct, kw_only=True):
    """The values vLLM's SamplingParams checks look at (``check_like_vllm``,
    ``check_engine_side``): the completions and chat builder's, after defaults and conversions.
    /inference/v1/generate's ``GenerateSampling`` has the same attributes (it takes
    SamplingParams fields as they are, ``extra_args``, ``stream_interval`` and ``detokenize``
    included, which the OpenAI endpoints never set)."""

    presence_penalty: float
    frequency_penalty: float
    repetition_penalty: float
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    max_tokens: int | None
    min_tokens: int
    logprobs: int | None
    prompt_logprobs: int | None
    stop: list[str]
    stop_token_ids: list[int]
    bad_words: list[str]
    logit_bias: dict[int, float] | None
    allowed_token_ids: list[int] | None
    thinking_token_budget: int | None
    extra_args: dict[str, Any] | None = None
    stream_interval: int | None = None
    detokenize: bool = True


def settle_like_vllm(sp: SamplingValues, n: int, ctx: ServingContext) -> None:
    """SamplingParams' ``__post_init__`` around its checks, on ``sp`` in place: a temperature
    above 0 but tiny raised to vLLM's minimum, the checks (``check_like_vllm``), then greedy
    sampling's other knobs reset."""
    if 0 < sp.temperature < MIN_TEMPERATURE:
        sp.temperature = MIN_TEMPERATURE
    check_like_vllm(sp, n, ctx)
    if sp.temperature < GREEDY_EPSILON:
        sp.top_p, sp.top_k, sp.min_p = 1.0, 0, 0.0


def check_like_vllm(sp: SamplingValues, n: int, ctx: ServingContext) -> None:
    """SamplingParams checks in vLLM's order and wording (which ones carry a parameter).

    ``max_tokens`` may be None (vLLM skips its checks then).
    """
    if n < 1:
        raise InvalidRequest(f"n must be at least 1, got {n}.")
    if n > ctx.max_n:
        raise InvalidRequest(f"n must be at most {ctx.max_n}, got {n}. To increase this limit, "
                             "set the VLLM_MAX_N_SEQUENCES environment variable.")
    if sp.extra_args:
        _check_extra_args(sp.extra_args)
    _check_sampling_knobs(sp)
    _check_lengths(sp)
    if any(not s for s in sp.stop):
        raise InvalidRequest("stop cannot contain an empty string.")
    if sp.stop and not sp.detokenize:
        raise InvalidRequest("stop strings are only supported when detokenize is True. "
                             "Set detokenize=True to use stop.")
    if any(not w for w in sp.bad_words):
        raise InvalidRequest(f"bad_words cannot contain an empty string. Got bad_words="
                             f"{sp.bad_words}")
    if sp.temperature < GREEDY_EPSILON and n > 1:
        raise InvalidRequest(f"n must be 1 when using greedy sampling, got {n}.")


def _check_sampling_knobs(sp: SamplingValues) -> None:
    """check_like_vllm's penalties, temperature, top_p, top_k and min_p, in vLLM's order."""
    for name in ("presence_penalty", "frequency_penalty"):
        if not -2.0 <= getattr(sp, name) <= 2.0:
            raise InvalidRequest(f"{name} must be in [-2, 2], got {getattr(sp, name)}.")
    rep = sp.repetition_penalty
    if not math.isfinite(rep):
        raise InvalidRequest(f"repetition_penalty must be a finite number, got {rep}.")
    if rep <= 0.0:
        raise InvalidRequest(f"repetition_penalty must be greater than zero, got {rep}.")
    t = sp.temperature
    for bad, text in ((not math.isfinite(t), "must be a finite number"),
                      (t < 0.0, "must be non-negative"), (t > 2.0, "must be in [0, 2]")):
        if bad:
            raise InvalidRequest(f"temperature {text}, got {t}.", param="temperature", value=t,
                                 show_value=True)
    if not 0.0 < sp.top_p <= 1.0:
        raise InvalidRequest(f"top_p must be in (0, 1], got {sp.top_p}.", param="top_p",
                             value=sp.top_p, show_value=True)
    if sp.top_k < -1:
        raise InvalidRequest(f"top_k must be 0 (disable), or at least 1, got {sp.top_k}.")
    if not 0.0 <= sp.min_p <= 1.0:
        raise InvalidRequest(f"min_p must be in [0, 1], got {sp.min_p}.")


def _check_lengths(sp: SamplingValues) -> None:
    """check_like_vllm's token counts: max_tokens, min_tokens, stream_interval and the logprob
    counts, in vLLM's order."""
    mt = sp.max_tokens
    if mt is not None and mt < 1:
        raise InvalidRequest(f"max_tokens must be at least 1, got {mt}.", param="max_tokens",
                             value=mt, show_value=True)
    if sp.min_tokens < 0:
        raise InvalidRequest("min_tokens must be greater than or equal to 0, got "
                             f"{sp.min_tokens}.")
    if mt is not None and sp.min_tokens > mt:
        raise InvalidRequest(f"min_tokens must be less than or equal to max_tokens={mt}, got "
                             f"{sp.min_tokens}.")
    interval = sp.stream_interval
    if interval is not None and interval < 1:
        raise InvalidRequest(f"stream_interval must be at least 1, got {interval}.",
                             param="stream_interval", value=interval, show_value=True)
    for name in ("logprobs", "prompt_logprobs"):
        value = getattr(sp, name)
        if value is not None and value != -1 and value < 0:
            raise InvalidRequest(f"{name} must be non-negative or -1, got {value}.", param=name,
                                 value=value, show_value=True)


def _check_extra_args(extra_args: Any) -> None:
    """Every integer in ``extra_args`` (keys too) must fit MessagePack's 64 bits."""
    pending, seen = [extra_args], set()
    while pending:
        value = pending.pop()
        if isinstance(value, int) and not -(2 ** 63) <= value < 2 ** 64:
            raise InvalidRequest("extra_args integers must be between -2**63 and 2**64 - 1.",
                                 param="extra_args")
        if isinstance(value, (dict, list)) and id(value) not in seen:
            seen.add(id(value))
            pending.extend([*value.keys(), *value.values()] if isinstance(value, dict) else value)


def check_engine_side(sp: SamplingValues, ctx: ServingContext) -> None:
    """The checks vLLM's engine client runs after building SamplingParams (vocab, logprobs,
    a thinking budget without a reasoning parser: vLLM's ``reasoning_config``)."""
    budget = sp.thinking_token_budget
    if budget is not None and budget != -1 and ctx.output_parsers.reasoning_parser is None:
        raise InvalidRequest("thinking_token_budget is set but reasoning_config is not "
                             "configured. Please set --reasoning-parser and/or "
                             "--reasoning-config to use thinking_token_budget.")
    vocab = ctx.tokenizer.vocab_size
    for name, label in (("logprobs", "sample"), ("prompt_logprobs", "prompt")):
        value = getattr(sp, name)
        if value:
            requested = vocab if value == -1 else value
            limit = vocab if ctx.max_logprobs == -1 else ctx.max_logprobs
            if requested > limit:
                raise InvalidRequest(f"Requested {label} logprobs of {requested}, which is "
                                     f"greater than max allowed: {limit}", param=name,
                                     value=requested, show_value=True)
    for name in ("stop_token_ids", "logit_bias"):
        bad = [t for t in (getattr(sp, name) or ()) if t < 0 or t >= vocab]
        if bad:
            raise InvalidRequest(f"token_id(s) {bad} in {name} contain out-of-vocab token ids. "
                                 f"Vocabulary size: {vocab}", param=name, value=bad,
                                 show_value=True)
    allowed = sp.allowed_token_ids
    if allowed is not None:
        if not allowed:
            raise InvalidRequest("allowed_token_ids is not None and empty!",
                                 param="allowed_token_ids", value=allowed, show_value=True)
        bad = [t for t in allowed if t < 0 or t >= vocab]
        if bad:
            raise InvalidRequest("allowed_token_ids contains out-of-vocab token id!",
                                 param="allowed_token_ids", value=bad, show_value=True)


def check_raw_constraints(body: dict) -> None:
    """The raw-body checks completions and chat end with, in vLLM's order: a ``json_schema``
    response format needs its schema, structural tags, the thinking budget's type."""
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema" and rf.get("json_schema") is None:
        raise InvalidRequest("When response_format type is 'json_schema', the 'json_schema' "
                             "field must be provided.", param="response_format")
    check_structural_tags(body)
    check_thinking_token_budget(body.get("thinking_token_budget"))


def check_logprob_counts(body: dict, names: tuple[str, ...]) -> None:
    """The raw-body logprob checks both endpoints share: integer types, and ``prompt_logprobs``
    (not with streams; positive or -1). ``names`` are the endpoint's integer logprob fields."""
    for name in names:
        value = body.get(name)
        if value is not None and not isinstance(value, (int, float)):
            raise InvalidRequest(f"`{name}` must be an integer.", param=name, value=value,
                                 show_value=True)
    prompt_logprobs = body.get("prompt_logprobs")
    if prompt_logprobs is not None:
        if body.get("stream") and (prompt_logprobs > 0 or prompt_logprobs == -1):
            raise InvalidRequest("`prompt_logprobs` are not available when `stream=True`.",
                                 param="prompt_logprobs")
        if prompt_logprobs < 0 and prompt_logprobs != -1:
            raise InvalidRequest("`prompt_logprobs` must be a positive value or -1.",
                                 param="prompt_logprobs", value=prompt_logprobs, show_value=True)
