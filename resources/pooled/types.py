"""Pooling request fields (vLLM 0.32's ``entrypoints/pooling/base/protocol.py`` mixins), in its
declaration order, as tables ``resources.common.fields`` runs (docs/pooling.md §2).

Runs on: request pool threads (pure data).
"""
from __future__ import annotations

from resources.chat.validate import v_message
from resources.common.fields import (MISSING, Field, v_bool, v_dict, v_int, v_int_list, v_list,
                                     v_literal, v_nullable, v_str, v_union)

INT64 = {"ge": -(2 ** 63), "le": 2 ** 63 - 1}

#: ``PoolingBasicRequestMixin``: every pooling request.
BASIC: list[Field] = [
    ("model", v_nullable(v_str()), None),
    ("user", v_nullable(v_str()), None),
    ("truncate_prompt_tokens", v_nullable(v_int(ge=-1)), None),
    ("padding", v_nullable(v_literal("max_length", "do_not_pad")), None),
    ("truncation_side", v_nullable(v_literal("left", "right")), None),
    ("request_id", v_str(), None),
    ("priority", v_int(**INT64), 0),
    ("mm_processor_kwargs", v_nullable(v_dict()), None),
    ("cache_salt", v_nullable(v_str(min_length=1, max_length=1024)), None),
]

#: ``CompletionRequestMixin``: ``input`` as text, texts, token ids or lists of them.
COMPLETION: list[Field] = [
    ("input", v_union(v_int_list(ge=0), v_list(v_int_list(ge=0)), v_str(), v_list(v_str())),
     MISSING),
    ("add_special_tokens", v_bool(), True),
]

#: ``ChatRequestMixin``: one conversation in ``messages``.
CHAT: list[Field] = [
    ("messages", v_list(v_message), MISSING),
    ("add_generation_prompt", v_bool(), False),
    ("continue_final_message", v_bool(), False),
    ("add_special_tokens", v_bool(), False),
    ("chat_template", v_nullable(v_str()), None),
    ("chat_template_kwargs", v_nullable(v_dict()), None),
    ("media_io_kwargs", v_nullable(v_dict()), None),
]

#: ``EncodingRequestMixin``: how vectors are written.
ENCODING: list[Field] = [
    ("encoding_format", v_literal("float", "base64", "bytes", "bytes_only"), "float"),
    ("embed_dtype", v_literal("float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2"),
     "float32"),
    ("endianness", v_literal("native", "big", "little"), "native"),
]

#: ``EmbedRequestMixin`` (after ``ENCODING``).
EMBED: list[Field] = [
    ("dimensions", v_nullable(v_int()), None),
    ("use_activation", v_nullable(v_bool()), None),
]

#: ``task`` of /pooling (vLLM's PoolingTask names).
TASK: list[Field] = [
    ("task", v_nullable(v_literal("embed", "classify", "token_embed", "token_classify", "plugin",
                                  "embed&token_classify")), None),
]


def table(*parts: list[Field]) -> list[Field]:
    """One field table from the mixins' tables, each name once (the first wins, as in pydantic's
    MRO the first mixin declares the field)."""
    seen: set[str] = set()
    out: list[Field] = []
    for part in parts:
        for field in part:
            if field[0] not in seen:
                seen.add(field[0])
                out.append(field)
    return out
