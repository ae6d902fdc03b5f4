"""/tokenize and /detokenize request fields (docs/text-parity.md §4.4), in vLLM's declaration order.

Data only, run by ``resources.common.fields.collect_fields``/``parse_struct`` into the typed
requests below. The chat form is rendered by the chat endpoint's template rendering
(``resources.chat.convert.render_prompt``), so it answers what that reads.

Runs on: request pool threads (pure data).
"""
from __future__ import annotations

from typing import Any

import msgspec

from resources.chat.validate import v_message
from resources.common.fields import (MISSING, Field, v_bool, v_dict, v_int, v_list, v_nullable,
                                     v_str)

COMPLETION_FIELDS: list[Field] = [
    ("model", v_nullable(v_str()), None),
    ("prompt", v_str(), MISSING),
    ("add_special_tokens", v_bool(), True),
    ("return_token_strs", v_nullable(v_bool()), False),
]

CHAT_FIELDS: list[Field] = [
    ("model", v_nullable(v_str()), None),
    ("messages", v_list(v_message), MISSING),
    ("add_generation_prompt", v_bool(), True),
    ("return_token_strs", v_nullable(v_bool()), False),
    ("continue_final_message", v_bool(), False),
    ("add_special_tokens", v_bool(), False),
    ("chat_template", v_nullable(v_str()), None),
    ("chat_template_kwargs", v_nullable(v_dict()), None),
    ("media_io_kwargs", v_nullable(v_dict()), None),
    ("mm_processor_kwargs", v_nullable(v_dict()), None),
    ("tools", v_nullable(v_list(v_dict())), None),
]

DETOKENIZE_FIELDS: list[Field] = [
    ("model", v_nullable(v_str()), None),
    ("tokens", v_list(v_int(ge=0, le=2 ** 63 - 1)), MISSING),
]


class TokenizeCompletionRequest(msgspec.Struct, frozen=True):
    """/tokenize, completion form (``COMPLETION_FIELDS``)."""

    model: str | None
    prompt: str
    add_special_tokens: bool
    return_token_strs: bool | None


class TokenizeChatRequest(msgspec.Struct, frozen=True):
    """/tokenize, chat form (``CHAT_FIELDS``)."""

    model: str | None
    messages: list[dict[str, Any]]
    add_generation_prompt: bool
    return_token_strs: bool | None
    continue_final_message: bool
    add_special_tokens: bool
    chat_template: str | None
    chat_template_kwargs: dict[str, Any] | None
    media_io_kwargs: dict[str, Any] | None
    mm_processor_kwargs: dict[str, Any] | None
    tools: list[dict[str, Any]] | None

    # The chat prompt's fields this form does not have (``render_prompt`` reads them).
    @property
    def documents(self) -> None:
        return None

    @property
    def reasoning_effort(self) -> None:
        return None


class DetokenizeRequest(msgspec.Struct, frozen=True):
    """/detokenize (``DETOKENIZE_FIELDS``)."""

    model: str | None
    tokens: list[int]
