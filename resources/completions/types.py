"""/v1/completions request fields: names, lax types and defaults, in vLLM's declaration order.

Data only: ``fields(max_stop_strings)`` is the table ``resources.common.fields.parse_struct``
runs into ``CompletionRequest``.

Runs on: request pool threads (pure data).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from resources.common.fields import (Field, v_any, v_bool, v_int, v_int_list, v_list, v_nullable,
                                     v_str, v_union)
from resources.common.sampling import SamplingRequest, sampling_fields

DEFAULT_MAX_TOKENS = 16

# pydantic's smart union `list[int>=0] | list[list[int>=0]] | str | list[str]`; ordered so that the
# first alternative that validates is also the exact-type match for JSON input.
PROMPT = v_nullable(v_union(v_int_list(ge=0), v_list(v_int_list(ge=0)), v_str(), v_list(v_str())))


@lru_cache(maxsize=8)
def fields(max_stop_strings: int) -> list[Field]:
    head: list[Field] = [
        ("model", v_nullable(v_str()), None),
        ("prompt", PROMPT, None),
        ("echo", v_nullable(v_bool()), False),
        ("logprobs", v_nullable(v_int()), None),
        ("max_tokens", v_nullable(v_int()), DEFAULT_MAX_TOKENS),
        ("n", v_int(), 1),
        ("suffix", v_nullable(v_str()), None),
        ("best_of", v_nullable(v_int()), None),
    ]
    tail: list[Field] = [
        ("add_special_tokens", v_bool(), True),
        ("prompt_embeds", v_any(), None),
        ("logits_processors", v_any(), None),
    ]
    return head + sampling_fields(max_stop_strings) + tail


class CompletionRequest(SamplingRequest, kw_only=True):
    """A /v1/completions request (``fields``), typed."""

    model: str | None
    prompt: str | list[str] | list[int] | list[list[int]] | None
    echo: bool | None
    logprobs: int | None
    max_tokens: int | None
    n: int
    suffix: str | None
    best_of: int | None
    add_special_tokens: bool
    prompt_embeds: Any
    logits_processors: Any
