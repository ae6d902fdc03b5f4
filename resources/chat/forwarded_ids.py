"""Prompt token ids forwarded to a P/D decode stage in ``kv_transfer_params``.

In disaggregated serving the router sends the decode stage the prefill stage's prompt token ids
as ``kv_transfer_params["prompt_token_ids"]``; vLLM 0.32's chat endpoint then feeds them to the
engine as they are (no template, no tokenization) and answers with them as the prompt. The key
is taken out of ``kv_transfer_params`` in every case (the engine never sees it); the ids are not
used when ``echo`` is set (the messages must be rendered for it). Malformed ids get vLLM's 400s
(``docs/parity.md`` §7).

Runs on: request pool threads (chat conversion).
"""
from __future__ import annotations

from typing import Any

from base.errors import InvalidRequest
from runtime.serving_context import ServingContext

PARAM = "kv_transfer_params.prompt_token_ids"


def forwarded_prompt_ids(ctx: ServingContext, fields: Any) -> list[int] | None:
    """The forwarded ids to use as the prompt, or None (render the messages)."""
    kv = fields.kv_transfer_params
    if not isinstance(kv, dict):
        return None
    ids = kv.pop("prompt_token_ids", None)
    if ids is None or fields.echo:
        return None
    # bool is an int subclass: exact types, as vLLM checks them.
    if not isinstance(ids, list) or not ids or any(type(i) is not int or i < 0 for i in ids):
        raise InvalidRequest("`kv_transfer_params['prompt_token_ids']` must be a non-empty list "
                             "of non-negative integers.", param=PARAM)
    if max(ids) >= ctx.tokenizer.vocab_size:
        raise InvalidRequest(f"Token id {max(ids)} is out of vocabulary", param=PARAM)
    return ids
