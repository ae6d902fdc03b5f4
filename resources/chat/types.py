"""/v1/chat/completions request fields: names, lax types and defaults, in vLLM's order.

Data only: ``fields(max_stop_strings)`` is the table ``resources.common.fields.parse_struct``
runs into ``ChatRequest``; ``messages`` uses the union validator of ``resources.chat.validate``.

Runs on: request pool threads (pure data).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from resources.chat.validate import v_message
from resources.common.fields import (MISSING, SLOW, Field, v_any, v_bool, v_dict, v_int,
                                     v_list, v_literal, v_nullable, v_str, v_union,
                                     with_fast_path)
from resources.common.sampling import SamplingRequest, sampling_fields


def _known_tool_choice(value: Any) -> Any:
    # PERF: the union tries "none" first, so "auto" (what every request with tools has, given
    # or defaulted) built and dropped a literal error: 8 of the ~80 us a tool chat's conversion
    # costs over a chat without tools.
    if value is None or value == "auto" or value == "none" or value == "required":
        return value
    return SLOW


#: ``tool_choice``: vLLM's ``"none" | "auto" | "required" | dict``, nullable.
TOOL_CHOICE = with_fast_path(v_nullable(v_union(v_literal("none"), v_literal("auto"),
                                                v_literal("required"), v_dict())),
                             _known_tool_choice)
REASONING_EFFORT = v_nullable(v_literal("none", "minimal", "low", "medium", "high", "xhigh",
                                        "max"))


@lru_cache(maxsize=8)
def fields(max_stop_strings: int) -> list[Field]:
    head: list[Field] = [
        ("messages", v_list(v_message), MISSING),
        ("model", v_nullable(v_str()), None),
        ("logprobs", v_nullable(v_bool()), False),
        ("top_logprobs", v_nullable(v_int()), 0),
        ("max_tokens", v_nullable(v_int()), None),
        ("max_completion_tokens", v_nullable(v_int()), None),
        ("n", v_nullable(v_int()), 1),
        ("tools", v_nullable(v_list(v_dict())), None),
        ("tool_choice", TOOL_CHOICE, "none"),
        ("reasoning_effort", REASONING_EFFORT, None),
        ("include_reasoning", v_bool(), True),
        ("parallel_tool_calls", v_nullable(v_bool()), True),
    ]
    tail: list[Field] = [
        ("echo", v_bool(), False),
        ("add_generation_prompt", v_bool(), True),
        ("continue_final_message", v_bool(), False),
        ("add_special_tokens", v_bool(), False),
        ("documents", v_nullable(v_list(v_dict(v_str()))), None),
        ("chat_template", v_nullable(v_str()), None),
        ("chat_template_kwargs", v_nullable(v_dict()), None),
        ("media_io_kwargs", v_nullable(v_dict()), None),
        ("mm_processor_kwargs", v_nullable(v_dict()), None),
        ("return_prompt_text", v_nullable(v_bool()), None),
        ("logits_processors", v_any(), None),
    ]
    return head + sampling_fields(max_stop_strings) + tail


class ChatRequest(SamplingRequest, kw_only=True):
    """A /v1/chat/completions request (``fields``), typed. Mutable: the output parsers adjust
    ``skip_special_tokens`` and the constraint before SamplingParams are built."""

    messages: list[dict[str, Any]]
    model: str | None
    logprobs: bool | None
    top_logprobs: int | None
    max_tokens: int | None
    max_completion_tokens: int | None
    n: int | None
    tools: list[dict[str, Any]] | None
    tool_choice: str | dict[str, Any] | None
    reasoning_effort: str | None
    include_reasoning: bool
    parallel_tool_calls: bool | None
    echo: bool
    add_generation_prompt: bool
    continue_final_message: bool
    add_special_tokens: bool
    documents: list[dict[str, str]] | None
    chat_template: str | None
    chat_template_kwargs: dict[str, Any] | None
    media_io_kwargs: dict[str, Any] | None
    mm_processor_kwargs: dict[str, Any] | None
    return_prompt_text: bool | None
    logits_processors: Any
