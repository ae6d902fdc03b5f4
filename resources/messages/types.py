"""Anthropic Messages request fields: names, types and defaults in vLLM 0.32's order.

``fields(max_stop_strings)`` is the table of ``POST /v1/messages`` (Anthropic's fields, then
vLLM's extras), ``COUNT_FIELDS`` that of ``/v1/messages/count_tokens``; ``parse_request`` runs a
table into its struct and adds the models' "after" checks (``model``, ``max_tokens``, ``system``,
the thinking budget). Its errors are OpenAI-shaped 400s, as vLLM's request validation answers
them on these routes.

Runs on: request pool threads (pure data).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

from resources.common.fields import (INVALID, MISSING, Field, add_error, collect_fields,
                                     require_object, v_bool, v_dict, v_float, v_int, v_list,
                                     v_literal, v_nullable, v_str, validation_error)
from resources.common.sampling import sampling_fields
from resources.messages.validate import (CONTENT, MESSAGE, OUTPUT_CONFIG, THINKING, TOOL,
                                         TOOL_CHOICE, tool_change_misplaced)


def _vllm_xargs() -> Any:
    # The same validator as chat's field of that name.
    return next(v for name, v, _ in sampling_fields(1) if name == "vllm_xargs")


_SHARED_HEAD: list[Field] = [
    ("model", v_str(), MISSING),
    ("messages", v_list(MESSAGE), MISSING),
]


@lru_cache(maxsize=8)
def fields(max_stop_strings: int) -> list[Field]:
    """``POST /v1/messages``' fields."""
    return _SHARED_HEAD + [
        ("max_tokens", v_int(), MISSING),
        ("metadata", v_nullable(v_dict()), None),
        ("output_config", v_nullable(OUTPUT_CONFIG), None),
        ("thinking", v_nullable(THINKING), None),
        ("stop_sequences", v_nullable(v_list(v_str(), max_length=max_stop_strings)), None),
        ("stream", v_nullable(v_bool()), False),
        ("system", v_nullable(CONTENT), None),
        ("temperature", v_nullable(v_float()), None),
        ("tool_choice", v_nullable(TOOL_CHOICE), None),
        ("tools", v_nullable(v_list(TOOL)), None),
        ("top_k", v_nullable(v_int()), None),
        ("top_p", v_nullable(v_float()), None),
        ("mm_payload", v_literal("tensors", "none"), "tensors"),
        ("return_mm_kwargs", v_nullable(v_bool()), None),
        ("cache_salt", v_nullable(v_str(min_length=1, max_length=1024)), None),
        ("watermarking", v_nullable(v_bool()), None),
        ("kv_transfer_params", v_nullable(v_dict()), None),
        ("ec_transfer_params", v_nullable(v_dict()), None),
        ("vllm_xargs", _vllm_xargs(), None),
        ("chat_template_kwargs", v_nullable(v_dict()), None),
    ]


COUNT_FIELDS: list[Field] = _SHARED_HEAD + [
    ("output_config", v_nullable(OUTPUT_CONFIG), None),
    ("system", v_nullable(CONTENT), None),
    ("thinking", v_nullable(THINKING), None),
    ("tool_choice", v_nullable(TOOL_CHOICE), None),
    ("tools", v_nullable(v_list(TOOL)), None),
    ("chat_template_kwargs", v_nullable(v_dict()), None),
]


class CountTokensRequest(msgspec.Struct, kw_only=True):
    """A ``/v1/messages/count_tokens`` request (``COUNT_FIELDS``); nested objects as dicts."""

    model: str
    messages: list[dict[str, Any]]
    output_config: dict[str, Any] | None = None
    system: str | list[dict[str, Any]] | None = None
    thinking: dict[str, Any] | None = None
    tool_choice: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    chat_template_kwargs: dict[str, Any] | None = None


class MessagesRequest(CountTokensRequest, kw_only=True):
    """A ``POST /v1/messages`` request (``fields``)."""

    max_tokens: int
    metadata: dict[str, Any] | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = False
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    mm_payload: str = "tensors"
    return_mm_kwargs: bool | None = None
    cache_salt: str | None = None
    watermarking: bool | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    vllm_xargs: dict[str, Any] | None = None


def _field_after(values: dict, errors: list) -> None:
    """The models' field validators ("after" mode): each reports at its field."""
    if values.get("model") == "":
        add_error(errors, "value_error", ("body", "model"), "Value error, Model is required", "",
                  {"error": ValueError("Model is required")})
    tokens = values.get("max_tokens")
    if isinstance(tokens, int) and tokens <= 0:
        add_error(errors, "value_error", ("body", "max_tokens"),
                  "Value error, max_tokens must be positive", tokens,
                  {"error": ValueError("max_tokens must be positive")})
    system = values.get("system")
    message = tool_change_misplaced(system) if system not in (None, INVALID) else None
    if message is not None:
        add_error(errors, "value_error", ("body", "system"), f"Value error, {message}", system,
                  {"error": ValueError(message)})


def _budget_error(f: MessagesRequest) -> str | None:
    """The request model's "after" check of the thinking budget (a prefill leg of a
    disaggregated deployment, ``do_remote_decode``, never decodes and is exempt)."""
    if f.kv_transfer_params and f.kv_transfer_params.get("do_remote_decode"):
        return None
    thinking = f.thinking
    if thinking is not None and thinking["type"] == "enabled" and (
            thinking["budget_tokens"] >= f.max_tokens):
        return "thinking.budget_tokens must be less than max_tokens"
    return None


def parse_request(body: Any, table: list[Field], struct: type) -> Any:
    """``body`` checked against ``table`` into ``struct`` (``MessagesRequest`` or
    ``CountTokensRequest``).

    Raises:
        RequestValidationError: every field error, as vLLM's request validation reports them.
    """
    body = require_object(body)
    values, errors = collect_fields(body, table)
    _field_after(values, errors)
    if errors:
        raise validation_error(errors)
    f = struct(**values)
    message = _budget_error(f) if isinstance(f, MessagesRequest) else None
    if message is not None:
        add_error(errors, "value_error", ("body",), f"Value error, {message}", body,
                  {"error": ValueError(message)})
        raise validation_error(errors)
    return f
