"""Prompt tokenization, truncation and length checks shared by completions and chat (docs/text-parity.md §4.1, §4.3).

vLLM tokenizes with the HF tokenizer loaded with ``truncation_side="left"``: without
``truncate_prompt_tokens`` it still truncates to ``max_model_len + 1`` (so an over-long prompt is
reported as "at least max_model_len + 1" tokens), and when it truncates it keeps the special
tokens the post-processor adds (BOS). An explicit ``truncation_side`` instead tokenizes the whole
text and slices the ids afterwards, which loses BOS. This module reproduces those rules on id
lists, since greenfront's tokenizer never truncates by itself.

Called by: ``resources.completions.convert``, ``resources.chat.convert``.
Runs on: request pool threads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from base.errors import InvalidRequest
from runtime.serving_context import ServingContext


@dataclass(frozen=True)
class TruncationRule:
    """vLLM's TokenizeParams as far as prompts are concerned."""

    max_model_len: int
    max_output_tokens: int
    truncate_prompt_tokens: int | None
    truncation_side: str | None
    add_special_tokens: bool

    @property
    def keep(self) -> int | None:
        """How many prompt tokens truncation keeps (None: no truncation requested)."""
        limit = self.truncate_prompt_tokens
        if limit is not None and limit < 0:
            # -1: the whole context, less one token for output when output is requested.
            return self.max_model_len - 1 if self.max_output_tokens else self.max_model_len
        return limit


def make_rule(ctx: ServingContext, *, max_output_tokens: int, output_param: str,
              truncate_prompt_tokens: int | None, truncation_side: str | None,
              add_special_tokens: bool) -> TruncationRule:
    """Build the rule, with vLLM's two up-front checks (docs/text-parity.md §8.2 wording).

    Raises:
        InvalidRequest: max_tokens above max_model_len; truncate_prompt_tokens above it.
    """
    if max_output_tokens > ctx.max_model_len:
        raise InvalidRequest(f"{output_param}={max_output_tokens} cannot be greater than "
                             f"max_model_len={ctx.max_model_len}. Please request fewer output "
                             "tokens.", param=output_param, value=max_output_tokens,
                             show_value=True)
    if truncate_prompt_tokens is not None and truncate_prompt_tokens > ctx.max_model_len:
        raise InvalidRequest(f"truncate_prompt_tokens={truncate_prompt_tokens} cannot be greater "
                             f"than max_model_len = {ctx.max_model_len}. Please request a smaller "
                             "truncation size.", param="truncate_prompt_tokens",
                             value=truncate_prompt_tokens, show_value=True)
    return TruncationRule(ctx.max_model_len, max_output_tokens, truncate_prompt_tokens,
                          truncation_side, add_special_tokens)


_SPECIALS_CACHE: dict[int, list[int]] = {}


def _added_specials(tokenizer: Any) -> list[int]:
    """The ids the post-processor adds to any text (``[BOS]`` here), computed once."""
    key = id(tokenizer)
    if key not in _SPECIALS_CACHE:
        _SPECIALS_CACHE[key] = tokenizer.encode("", True)
    return _SPECIALS_CACHE[key]


def _tokenizer_truncate(ids: list[int], keep: int, specials: list[int]) -> list[int]:
    """HF left truncation to ``keep`` ids that never drops the added special tokens."""
    if len(ids) <= keep:
        return ids
    k = len(specials)
    for p in range(k, -1, -1):  # how many of the specials lead (the rest trail)
        if ids[:p] == specials[:p] and ids[len(ids) - (k - p):] == specials[p:]:
            body = ids[p:len(ids) - (k - p)]
            budget = max(keep - k, 0)
            return ids[:p] + (body[len(body) - budget:] if budget else []) + specials[p:]
    return ids[len(ids) - keep:]


def slice_ids(ids: list[int], rule: TruncationRule) -> list[int]:
    """vLLM's post-tokenization truncation of an id list (token prompts, explicit sides)."""
    keep = rule.keep
    if keep is None or keep >= len(ids):
        return ids
    if keep == 0:
        return []
    return ids[:keep] if rule.truncation_side == "right" else ids[-keep:]


def check_length(ids: list[int], rule: TruncationRule) -> list[int]:
    """The prompt-too-long 400 (docs/text-parity.md §8.2), "at least" when the tokenizer capped the prompt."""
    limit = rule.max_model_len
    if len(ids) > limit:
        count = len(ids)
        qualifier = "at least " if count == limit + 1 else ""
        raise InvalidRequest(f"This model's maximum context length is {limit} tokens. However, "
                             f"your prompt contains {qualifier}{count} input tokens, which exceeds "
                             "this limit even without any output tokens. Please reduce the length "
                             "of the input prompt.", param="input_tokens", value=count,
                             show_value=True)
    return ids


def tokenize_texts(ctx: ServingContext, texts: list[str], rule: TruncationRule) -> list[list[int]]:
    """Tokenize text prompts as vLLM does: char pre-check, encode, truncate, length check."""
    tokenizer = ctx.tokenizer
    max_chars = rule.max_model_len * tokenizer.max_chars_per_token
    prepared = []
    for text in texts:
        if rule.truncate_prompt_tokens is None:
            if len(text) > max_chars:
                raise InvalidRequest(
                    f"This model's maximum context length is {rule.max_model_len} tokens. "
                    f"However, your prompt contains {len(text)} characters (more than {max_chars} "
                    f"characters, which is the upper bound for {rule.max_model_len} input "
                    "tokens). Please reduce the length of the input prompt.",
                    param="input_text", value=len(text), show_value=True)
        elif rule.truncation_side is not None and len(text) > max_chars:
            text = text[-max_chars:] if rule.truncation_side == "left" else text[:max_chars]
        prepared.append(text)
    encoded = tokenizer.encode_many(prepared, rule.add_special_tokens)
    # The tokenizer-level cap: the requested size, or max_model_len + 1 as a work bound; an
    # explicit side disables it (the ids are sliced below instead).
    explicit_side = rule.truncation_side is not None and rule.truncate_prompt_tokens is not None
    cap = None if explicit_side else (rule.keep if rule.keep is not None
                                      else rule.max_model_len + 1)
    specials = _added_specials(tokenizer) if rule.add_special_tokens else []
    out = []
    for ids in encoded:
        if cap is not None:
            ids = _tokenizer_truncate(ids, cap, specials)
        out.append(check_length(slice_ids(ids, rule), rule))
    return out


def check_vocab(ctx: ServingContext, ids: list[int]) -> None:
    """Token-id prompts must be in vocabulary (docs/text-parity.md §8.2 "token out of vocab", param null)."""
    if not ids:
        return
    low, high = min(ids), max(ids)
    if low < 0:
        raise InvalidRequest(f"Token id {low} is out of vocabulary")
    if high >= ctx.tokenizer.vocab_size:
        raise InvalidRequest(f"Token id {high} is out of vocabulary")


def tokenize_ids(ctx: ServingContext, ids: list[int], rule: TruncationRule) -> list[int]:
    """A token-id prompt: vocabulary check, truncation, length check."""
    check_vocab(ctx, ids)
    return check_length(slice_ids(list(ids), rule), rule)


def check_not_empty(ids: list[int]) -> None:
    """The engine-side refusal of an empty prompt (e.g. ``truncate_prompt_tokens: 0``)."""
    if not ids:
        raise InvalidRequest("The decoder prompt cannot be empty")
