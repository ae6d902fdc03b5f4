"""/tokenize and /detokenize: body -> response JSON bytes (docs/text-parity.md §4.4).

``/tokenize`` takes the chat form when the body has ``messages`` (rendered with the chat template,
``add_special_tokens`` false by default) and the completion form otherwise (``add_special_tokens``
true). Neither form truncates or checks lengths; ``max_model_len`` is only reported. Response
fields: ``count, max_model_len, tokens, token_strs``. ``/detokenize`` decodes with special
tokens kept; ids past the vocabulary decode to "".

Called by: ``resources.tokenize.resource``.
Runs on: request pool threads.
"""
from __future__ import annotations

from typing import Any

from base.errors import InvalidRequest
from base.jsonio import dumps
from resources.chat.convert import render_prompt
from resources.chat.validate import check_template_trust
from runtime.serving_context import ServingContext
from resources.common.fields import (collect_fields, parse_struct, require_object,
                                     validation_error)
from resources.tokenize import types

MAX_TOKENIZER_ID = 2 ** 32 - 1
"""The largest id Hugging Face ``tokenizers`` can decode (ids are u32 there)."""


def _pick_form(body: dict) -> types.TokenizeChatRequest | types.TokenizeCompletionRequest:
    """vLLM's body is the union ``completion form | chat form``: the chat form when it validates
    and has ``messages``, else the completion form, else both forms' errors (§4.4)."""
    if "messages" in body and body.get("continue_final_message") and body.get(
            "add_generation_prompt"):
        raise InvalidRequest("Cannot set both `continue_final_message` and "
                             "`add_generation_prompt` to True.")
    chat, chat_errors = collect_fields(body, types.CHAT_FIELDS)
    if "messages" in body and not chat_errors:
        return types.TokenizeChatRequest(**chat)
    completion, completion_errors = collect_fields(body, types.COMPLETION_FIELDS)
    if not completion_errors:
        return types.TokenizeCompletionRequest(**completion)
    raise validation_error(completion_errors + chat_errors)


def _chat_prompt(f: types.TokenizeChatRequest, ctx: ServingContext) -> str:
    # Tools need no tool_choice here; only the template-trust rule of chat applies.
    check_template_trust(f, ctx)
    return render_prompt(ctx, f)[1]


def tokenize(body: Any, ctx: ServingContext) -> bytes:
    """The /tokenize response body.

    Raises:
        RequestValidationError, ModelNotFound, InvalidRequest: as /v1/chat/completions and
            /v1/completions would for the same fields.
    """
    f = _pick_form(require_object(body))
    ctx.check_model(f.model)
    text = (_chat_prompt(f, ctx) if isinstance(f, types.TokenizeChatRequest) else f.prompt)
    ids = ctx.tokenizer.encode_many([text], f.add_special_tokens)[0]
    strs = ctx.tokenizer.convert_ids_to_tokens(ids) if f.return_token_strs else None
    return dumps({"count": len(ids), "max_model_len": ctx.max_model_len, "tokens": ids,
                  "token_strs": strs})


def detokenize(body: Any, ctx: ServingContext) -> bytes:
    """The /detokenize response body ``{"prompt": …}``.

    Raises:
        RequestValidationError: e.g. a negative id (§8.2).
        InvalidRequest: an id past 2^32 - 1, which no tokenizer can hold.
        ModelNotFound: unknown ``model``.
    """
    body = require_object(body)
    f = parse_struct(body, types.DETOKENIZE_FIELDS, types.DetokenizeRequest)
    ctx.check_model(f.model)
    if f.tokens and max(f.tokens) > MAX_TOKENIZER_ID:
        # The field allows any i64 (as vLLM's does), the tokenizer only u32 ids; vLLM answers
        # the tokenizer's OverflowError with this 400.
        raise InvalidRequest("number too large to fit in target type")
    return dumps({"prompt": ctx.tokenizer.decode(f.tokens, False)})
