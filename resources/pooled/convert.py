"""A pooling request body -> ``PooledRequest``: one engine request per input, with vLLM 0.32's
pooling params (docs/pooling.md §2, §3).

The prompt is tokenized as vLLM's pooling renderer does: BOS added for text input
(``add_special_tokens`` true), the chat template without the generation prompt for ``messages``,
and ``truncate_prompt_tokens`` keeping the first tokens (a pooling tokenizer truncates on the
right). Every engine request carries the same ``PoolingParams``, its defaults resolved here as
vLLM's ``PoolingParams.verify`` resolves them.

Runs on: request pool threads.
"""
from __future__ import annotations

import uuid
from typing import Any

from base.errors import InvalidRequest, ModelNotFound
from engine.protocol import LoRARequest, PoolingParams
from resources.chat.convert import render_prompt
from resources.chat.validate import check_template_trust
from resources.common.fields import collect_fields, require_object, validation_error
from streaming.prepared import PooledItem, PooledRequest
from resources.common.prompts import (TruncationRule, check_not_empty, tokenize_ids,
                                      tokenize_texts)
from resources.tokenize.types import TokenizeChatRequest
from runtime.serving_context import ServingContext


def parse_body(body: Any, completion: list, chat: list | None) -> tuple[dict[str, Any], bool]:
    """The fields of the completion form, or of the chat form when the body has ``messages``
    (and ``chat`` is given); returns (fields, is_chat)."""
    body = require_object(body)
    if "normalize" in body:
        raise InvalidRequest("Parameter `normalize` was removed; use `use_activation` instead.",
                             param="normalize")
    if body.get("task") in ("score", "encode"):
        raise InvalidRequest({"score": "`score` task was removed; use `classify` instead.",
                              "encode": "`encode` task was removed; use `token_embed` or "
                                        "`token_classify` instead."}[body["task"]], param="task")
    if chat is not None and "messages" in body:
        if body.get("continue_final_message") and body.get("add_generation_prompt"):
            raise InvalidRequest("Cannot set both `continue_final_message` and "
                                 "`add_generation_prompt` to True.")
        values, errors = collect_fields(body, chat)
        if not errors:
            return values, True
    values, errors = collect_fields(body, completion)
    if errors:
        raise validation_error(errors)
    return values, False


def base_request(f: dict[str, Any], ctx: ServingContext, prefix: str,
                 header_request_id: str | None) -> tuple[str, LoRARequest | None, str]:
    """(request id, adapter, response model) as vLLM's pooling serving derives them. An unknown
    ``model`` is served by the base model: vLLM 0.32's pooling routes do not refuse it."""
    rid = header_request_id or f["request_id"] or uuid.uuid4().hex
    try:
        lora = ctx.resolve_model(f["model"])
    except ModelNotFound:
        lora = None
    return f"{prefix}-{rid}", lora, ctx.response_model(lora)


def check_common(f: dict[str, Any], ctx: ServingContext) -> None:
    """Refusals every pooling request shares."""
    limit = f.get("truncate_prompt_tokens")
    if limit is not None and limit > ctx.max_model_len:
        raise InvalidRequest("truncate_prompt_tokens value is greater than max_model_len. "
                             "Please request a smaller truncation size.")
    if f.get("padding") == "max_length":
        raise InvalidRequest("greenfront does not implement `padding: max_length`.",
                             param="padding")


def prompts(f: dict[str, Any], ctx: ServingContext, is_chat: bool) -> list[list[int]]:
    """The token ids of every input, truncated and length-checked."""
    rule = TruncationRule(ctx.max_model_len, 0, f.get("truncate_prompt_tokens"),
                          f.get("truncation_side") or "right", f["add_special_tokens"])
    if is_chat:
        chat = TokenizeChatRequest(
            model=f["model"], messages=f["messages"],
            add_generation_prompt=f["add_generation_prompt"], return_token_strs=False,
            continue_final_message=f["continue_final_message"],
            add_special_tokens=f["add_special_tokens"], chat_template=f["chat_template"],
            chat_template_kwargs=f["chat_template_kwargs"], media_io_kwargs=f["media_io_kwargs"],
            mm_processor_kwargs=f["mm_processor_kwargs"], tools=None)
        check_template_trust(chat, ctx)
        ids = tokenize_texts(ctx, [render_prompt(ctx, chat)[1]], rule)
    else:
        inputs = f["input"]
        if isinstance(inputs, str) or (inputs and all(type(p) is int for p in inputs)):
            inputs = [inputs]
        if not inputs:
            raise InvalidRequest("You must pass at least one prompt")
        texts = [p for p in inputs if isinstance(p, str)]
        encoded = iter(tokenize_texts(ctx, texts, rule) if texts else ())
        ids = [next(encoded) if isinstance(p, str) else tokenize_ids(ctx, p, rule)
               for p in inputs]
    for one in ids:
        check_not_empty(one)
    return ids


def build(f: dict[str, Any], ctx: ServingContext, is_chat: bool, prefix: str,
          header_request_id: str | None, params: PoolingParams) -> PooledRequest:
    """The engine requests: ``<prefix>-<id>-<i>`` per input, each with ``params``."""
    check_common(f, ctx)
    request_id, lora, model = base_request(f, ctx, prefix, header_request_id)
    items = [PooledItem(f"{request_id}-{i}", ids, params)
             for i, ids in enumerate(prompts(f, ctx, is_chat))]
    return PooledRequest(request_id, model, items, f, lora_request=lora,
                         cache_salt=f.get("cache_salt"), priority=f.get("priority", 0))


def pooling_params(task: str, use_activation: bool | None = None,
                   dimensions: int | None = None) -> PoolingParams:
    """vLLM's params after ``verify``: activation on unless refused, prefix cache readable."""
    return PoolingParams(use_activation=True if use_activation is None else use_activation,
                         dimensions=dimensions, task=task, skip_reading_prefix_cache=False)
