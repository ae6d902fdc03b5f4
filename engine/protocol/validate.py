"""Last guard before the wire: range- and type-check a SamplingParams (docs/engine-protocol.md §3.3).

Owns ``validate_sampling_params``. A real engine validates SamplingParams while
decoding an ADD in its input thread, outside any error handler: one bad value
kills that thread and the engine silently stops reading requests (docs/engine-protocol.md §3.1).
So the frontend must reject here everything the engine would reject, including
wrong *types* (msgspec on the engine side refuses a bool where an int belongs).
Called by greenfront's request conversion just before ``codec.encode_add``, and
by the simulator to mimic the engine's input-thread failure.

Runs on: any thread (pure function).
"""

from __future__ import annotations

import math
from typing import Any

from engine.protocol.requests import SamplingParams

__all__ = ["SamplingParamsError", "validate_sampling_params"]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1
#: vLLM caps explicitly requested logprob token ids per request.
MAX_LOGPROB_TOKEN_IDS = 128
_STRUCTURED_CONSTRAINTS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")


class SamplingParamsError(ValueError):
    """A sampling parameter the engine would refuse.

    Attributes:
        param: the OpenAI-facing parameter name when there is one (wire name
            otherwise), or None for cross-field problems.
        value: the offending value.
    """

    def __init__(self, message: str, param: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.param = param
        self.value = value


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(name: str, v: Any, optional: bool = False) -> None:
    if v is None and optional:
        return
    if not _is_int(v):
        raise SamplingParamsError(f"{name} must be an integer, got {v!r}.", name, v)
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise SamplingParamsError(f"{name} must fit in a signed 64-bit integer, got {v}.", name, v)


def _float(name: str, v: Any) -> None:
    if not _is_num(v):
        raise SamplingParamsError(f"{name} must be a number, got {v!r}.", name, v)
    if not math.isfinite(v):
        raise SamplingParamsError(f"{name} must be a finite number, got {v}.", name, v)


def _bool(name: str, v: Any, optional: bool = False) -> None:
    if v is None and optional:
        return
    if not isinstance(v, bool):
        raise SamplingParamsError(f"{name} must be a boolean, got {v!r}.", name, v)


def _token_list(name: str, v: Any, vocab_size: int | None, optional: bool = True) -> None:
    if v is None and optional:
        return
    if not isinstance(v, (list, tuple)):
        raise SamplingParamsError(f"{name} must be a list of token ids, got {v!r}.", name, v)
    for tok in v:
        if not _is_int(tok):
            raise SamplingParamsError(f"{name} must contain only integer token ids, got {tok!r}.", name, v)
        if tok < 0 or (vocab_size is not None and tok >= vocab_size):
            raise SamplingParamsError(
                f"{name} contains out-of-vocab token id {tok}. Vocabulary size: {vocab_size}.", name, v
            )


def _check_wire_ints(name: str, v: Any, depth: int = 0) -> None:
    # extra_args is free-form but ints must fit msgpack's int64/uint64.
    if depth > 32:
        raise SamplingParamsError(f"{name} is nested too deeply.", name, v)
    if _is_int(v):
        if not _INT64_MIN <= v <= _UINT64_MAX:
            raise SamplingParamsError(f"{name} contains an integer that does not fit 64 bits: {v}.", name, v)
    elif isinstance(v, float):
        return
    elif isinstance(v, dict):
        for key, item in v.items():
            _check_wire_ints(name, key, depth + 1)
            _check_wire_ints(name, item, depth + 1)
    elif isinstance(v, (list, tuple)):
        # PERF: a list of plain ints (token ids in vllm_xargs) is checked by its bounds, not an
        # item at a time (~20 us for 53 ids); one out of range takes the loop for its message.
        if v and all(type(item) is int for item in v) and (
                _INT64_MIN <= min(v) and max(v) <= _UINT64_MAX):
            return
        for item in v:
            _check_wire_ints(name, item, depth + 1)
    elif v is not None and not isinstance(v, (str, bool, bytes)):
        raise SamplingParamsError(f"{name} contains a value that cannot be sent: {type(v).__name__}.", name, v)


def _check_sampling(sp: SamplingParams) -> None:
    _int("n", sp.n)
    if sp.n != 1:
        # n > 1 is a frontend fan-out; every engine request carries n == 1.
        raise SamplingParamsError(f"n must be 1 on an engine request, got {sp.n}.", "n", sp.n)
    for name in ("presence_penalty", "frequency_penalty"):
        value = getattr(sp, name)
        _float(name, value)
        if not -2.0 <= value <= 2.0:
            raise SamplingParamsError(f"{name} must be in [-2, 2], got {value}.", name, value)
    _float("repetition_penalty", sp.repetition_penalty)
    if sp.repetition_penalty <= 0.0:
        raise SamplingParamsError(
            f"repetition_penalty must be greater than zero, got {sp.repetition_penalty}.",
            "repetition_penalty",
            sp.repetition_penalty,
        )
    _float("temperature", sp.temperature)
    if not 0.0 <= sp.temperature <= 2.0:
        raise SamplingParamsError(f"temperature must be in [0, 2], got {sp.temperature}.", "temperature", sp.temperature)
    _float("top_p", sp.top_p)
    if not 0.0 < sp.top_p <= 1.0:
        raise SamplingParamsError(f"top_p must be in (0, 1], got {sp.top_p}.", "top_p", sp.top_p)
    _int("top_k", sp.top_k)
    if sp.top_k < -1:
        raise SamplingParamsError(
            f"top_k must be 0 or -1 (disable), or at least 1, got {sp.top_k}.", "top_k", sp.top_k
        )
    _float("min_p", sp.min_p)
    if not 0.0 <= sp.min_p <= 1.0:
        raise SamplingParamsError(f"min_p must be in [0, 1], got {sp.min_p}.", "min_p", sp.min_p)
    _int("seed", sp.seed, optional=True)
    _bool("watermarking", sp.watermarking, optional=True)


def _check_lengths(sp: SamplingParams) -> None:
    if sp.max_tokens is None:
        # The engine fails a request whose max_tokens is nil; the frontend must fill it in.
        raise SamplingParamsError("max_tokens must be set on an engine request.", "max_tokens", None)
    _int("max_tokens", sp.max_tokens)
    if sp.max_tokens < 1:
        raise SamplingParamsError(f"max_tokens must be at least 1, got {sp.max_tokens}.", "max_tokens", sp.max_tokens)
    _int("min_tokens", sp.min_tokens)
    if sp.min_tokens < 0:
        raise SamplingParamsError(
            f"min_tokens must be greater than or equal to 0, got {sp.min_tokens}.", "min_tokens", sp.min_tokens
        )
    if sp.min_tokens > sp.max_tokens:
        raise SamplingParamsError(
            f"min_tokens must be less than or equal to max_tokens={sp.max_tokens}, got {sp.min_tokens}.",
            "min_tokens",
            sp.min_tokens,
        )
    for name in ("logprobs", "prompt_logprobs"):
        value = getattr(sp, name)
        _int(name, value, optional=True)
        if value is not None and value < -1:
            raise SamplingParamsError(f"{name} must be non-negative or -1, got {value}.", name, value)
    _int("prompt_logprob_start", sp.prompt_logprob_start, optional=True)
    if sp.prompt_logprob_start is not None and sp.prompt_logprob_start < 0:
        raise SamplingParamsError(
            f"prompt_logprob_start must be non-negative, got {sp.prompt_logprob_start}.",
            "prompt_logprob_start",
            sp.prompt_logprob_start,
        )
    _int("stream_interval", sp.stream_interval, optional=True)
    if sp.stream_interval is not None and sp.stream_interval < 1:
        raise SamplingParamsError(
            f"stream_interval must be at least 1, got {sp.stream_interval}.", "stream_interval", sp.stream_interval
        )
    _int("output_kind", sp.output_kind)
    if sp.output_kind not in (0, 1, 2):
        raise SamplingParamsError(f"output_kind must be 0, 1 or 2, got {sp.output_kind}.", "output_kind", sp.output_kind)
    _int("output_text_buffer_length", sp.output_text_buffer_length)
    if sp.output_text_buffer_length < 0:
        raise SamplingParamsError(
            "output_text_buffer_length must be non-negative.", "output_text_buffer_length", sp.output_text_buffer_length
        )
    _int("thinking_token_budget", sp.thinking_token_budget, optional=True)
    if sp.thinking_token_budget is not None and sp.thinking_token_budget < -1:
        raise SamplingParamsError(
            f"thinking_token_budget must be non-negative or -1, got {sp.thinking_token_budget}.",
            "thinking_token_budget",
            sp.thinking_token_budget,
        )
    _int("routed_experts_prompt_start", sp.routed_experts_prompt_start)
    if sp.routed_experts_prompt_start < 0:
        raise SamplingParamsError(
            "routed_experts_prompt_start must be non-negative.",
            "routed_experts_prompt_start",
            sp.routed_experts_prompt_start,
        )


def _check_flags(sp: SamplingParams) -> None:
    for name in (
        "ignore_eos",
        "flat_logprobs",
        "detokenize",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "include_stop_str_in_output",
        "skip_clone",
        "watermarking_skipped",
    ):
        _bool(name, getattr(sp, name))
    _bool("skip_reading_prefix_cache", sp.skip_reading_prefix_cache, optional=True)


def _check_stops(sp: SamplingParams, vocab_size: int | None) -> None:
    stop = sp.stop
    if stop is not None:
        items = [stop] if isinstance(stop, str) else stop
        if not isinstance(items, (list, tuple)) or not all(isinstance(s, str) for s in items):
            raise SamplingParamsError(f"stop must be a string or a list of strings, got {stop!r}.", "stop", stop)
        if any(s == "" for s in items):
            raise SamplingParamsError("stop cannot contain an empty string.", "stop", stop)
        if items and not sp.detokenize:
            raise SamplingParamsError("stop strings are only supported when detokenize is True.", "stop", stop)
    _token_list("stop_token_ids", sp.stop_token_ids, vocab_size)
    _token_list("all_stop_token_ids", sp.all_stop_token_ids, vocab_size, optional=False)
    _int("eos_token_id", sp.eos_token_id, optional=True)
    if sp.eos_token_id is not None and (sp.eos_token_id < 0 or (vocab_size is not None and sp.eos_token_id >= vocab_size)):
        raise SamplingParamsError(
            f"eos_token_id {sp.eos_token_id} is out of vocab. Vocabulary size: {vocab_size}.",
            "eos_token_id",
            sp.eos_token_id,
        )
    if sp.bad_words is not None:
        if not isinstance(sp.bad_words, (list, tuple)) or not all(isinstance(w, str) for w in sp.bad_words):
            raise SamplingParamsError("bad_words must be a list of strings.", "bad_words", sp.bad_words)
    if sp.bad_words_token_ids is not None:
        if not isinstance(sp.bad_words_token_ids, (list, tuple)):
            raise SamplingParamsError("bad_words token ids must be a list of lists.", "bad_words", sp.bad_words_token_ids)
        for ids in sp.bad_words_token_ids:
            _token_list("bad_words", ids, vocab_size, optional=False)


def _check_token_controls(sp: SamplingParams, vocab_size: int | None) -> None:
    bias = sp.logit_bias
    if bias is not None:
        if not isinstance(bias, dict):
            raise SamplingParamsError("logit_bias must be a map of token id to bias.", "logit_bias", bias)
        for tok, val in bias.items():
            if not _is_int(tok):
                raise SamplingParamsError(f"logit_bias keys must be integer token ids, got {tok!r}.", "logit_bias", bias)
            if tok < 0 or (vocab_size is not None and tok >= vocab_size):
                raise SamplingParamsError(
                    f"token_id(s) [{tok}] in logit_bias contain out-of-vocab token ids. Vocabulary size: {vocab_size}",
                    "logit_bias",
                    bias,
                )
            _float("logit_bias", val)
    if sp.allowed_token_ids is not None:
        if isinstance(sp.allowed_token_ids, (list, tuple)) and len(sp.allowed_token_ids) == 0:
            raise SamplingParamsError("allowed_token_ids is not None and empty!", "allowed_token_ids", [])
        _token_list("allowed_token_ids", sp.allowed_token_ids, vocab_size)
    if sp.logprob_token_ids is not None:
        _token_list("logprob_token_ids", sp.logprob_token_ids, vocab_size)
        if len(sp.logprob_token_ids) > MAX_LOGPROB_TOKEN_IDS:
            raise SamplingParamsError(
                f"logprob_token_ids can list at most {MAX_LOGPROB_TOKEN_IDS} ids, got {len(sp.logprob_token_ids)}.",
                "logprob_token_ids",
                len(sp.logprob_token_ids),
            )
    _token_list("trace_decode_token_ids", sp.trace_decode_token_ids, vocab_size)


def _check_maps(sp: SamplingParams) -> None:
    so = sp.structured_outputs
    if so is not None:
        if not isinstance(so, dict):
            raise SamplingParamsError("structured_outputs must be a map.", "structured_outputs", so)
        used = [k for k in _STRUCTURED_CONSTRAINTS if so.get(k) is not None]
        if len(used) != 1:
            raise SamplingParamsError(
                "structured_outputs needs exactly one constraint (json, regex, choice, grammar, "
                f"json_object or structural_tag), got {used or 'none'}.",
                "structured_outputs",
                so,
            )
        _check_wire_ints("structured_outputs", so)
    if sp.extra_args is not None:
        if not isinstance(sp.extra_args, dict) or not all(isinstance(k, str) for k in sp.extra_args):
            raise SamplingParamsError("extra_args must be a map with string keys.", "extra_args", sp.extra_args)
        _check_wire_ints("extra_args", sp.extra_args)
    rd = sp.repetition_detection
    if rd is not None:
        if not isinstance(rd, dict):
            raise SamplingParamsError("repetition_detection must be a map.", "repetition_detection", rd)
        for key in ("max_pattern_size", "min_pattern_size", "min_count"):
            if key in rd and not (_is_int(rd[key]) and rd[key] >= 0):
                raise SamplingParamsError(
                    f"repetition_detection.{key} must be a non-negative integer, got {rd[key]!r}.",
                    "repetition_detection",
                    rd,
                )
        lo, hi = rd.get("min_pattern_size", 0), rd.get("max_pattern_size", 0)
        if lo and hi and lo > hi:
            raise SamplingParamsError(
                "repetition_detection.min_pattern_size must not exceed max_pattern_size.", "repetition_detection", rd
            )


def validate_sampling_params(sp: SamplingParams, vocab_size: int | None) -> None:
    """Raise ``SamplingParamsError`` if an engine would refuse ``sp``.

    Checks types and every range of docs/engine-protocol.md §3.3: temperature [0, 2] finite,
    top_p (0, 1], top_k 0/-1/>=1, min_p [0, 1], penalties, max_tokens set and
    >= 1, min_tokens <= max_tokens, logprobs >= -1, n == 1, seed int64, stop
    strings non-empty, token ids inside the vocabulary (when ``vocab_size`` is
    known), logit_bias int keys, allowed_token_ids non-empty, structured
    outputs with exactly one constraint, extra_args ints within 64 bits.

    Args:
        sp: the parameters about to be sent.
        vocab_size: the model's vocabulary size, or None to skip vocab checks.
    """
    if not isinstance(sp, SamplingParams):
        raise SamplingParamsError("sampling_params must be a SamplingParams.", None, sp)
    _check_sampling(sp)
    _check_lengths(sp)
    _check_flags(sp)
    _check_stops(sp, vocab_size)
    _check_token_controls(sp, vocab_size)
    _check_maps(sp)
