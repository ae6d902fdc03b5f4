"""/v1/completions bytes: stream chunks and the non-streamed body, field for field as vLLM 0.32.

Stream chunks carry only the keys vLLM's code sets (pydantic ``exclude_unset``): every choice
key, ``usage`` with continuous usage, and ``system_fingerprint`` on a terminal chunk only when no
usage chunk follows (docs/text-parity.md §6.3). The non-streamed body carries every field with its nulls (docs/text-parity.md §6.2).

Called by: ``resources/generate_resource.py`` and the bodies in ``streaming/body.py``, with a
``RequestState``.
Runs on: the HTTP hub.
"""
from __future__ import annotations

from typing import Any

from base.jsonio import dumps
from streaming.request_metrics import request_metrics
from streaming.logprobs import completion_logprobs, prompt_logprobs_json
from streaming.output import ChoiceDelta, RequestState
from streaming.prepared import PreparedRequest
from streaming.stream_renderer import ChunkStreamRenderer

OBJECT = "text_completion"


class CompletionStreamRenderer(ChunkStreamRenderer):
    """Turns ``ChoiceDelta``s of one streamed completion into SSE frames."""

    OBJECT = OBJECT

    def chunk(self, choice_index: int, delta: ChoiceDelta | None, state: RequestState) -> bytes:
        """The frame for one delta, or b"" when vLLM would send nothing for it."""
        if delta is None:
            return b""
        p = self.prepared
        c = state.choices[choice_index]
        prompt_ids = None
        if p.echo and delta.first:
            prompt_text = c.choice.prompt_text or ""
            text = prompt_text if p.echo_only else prompt_text + delta.text
            prompt_ids = c.choice.prompt_token_ids
        else:
            text = delta.text
            if delta.first and p.return_token_ids:
                prompt_ids = c.choice.prompt_token_ids
            previous = delta.completion_tokens - len(delta.token_ids)
            if not text and not delta.token_ids and not previous:
                return b""  # vLLM skips empty steps before the first token
        choice = {"index": delta.index, "text": text, "logprobs": delta.logprobs,
                  "finish_reason": delta.finish_reason, "stop_reason": delta.stop_reason,
                  "prompt_token_ids": prompt_ids,
                  "token_ids": delta.token_ids if p.return_token_ids else None}
        extra: dict[str, Any] = {}
        if p.continuous_usage:
            prompt = c.prompt_tokens
            extra["usage"] = {"prompt_tokens": prompt,
                              "total_tokens": prompt + delta.completion_tokens,
                              "completion_tokens": delta.completion_tokens}
        if (not p.include_usage and self.fingerprint is not None
                and delta.finish_reason is not None):
            extra["system_fingerprint"] = self.fingerprint
        return self.event(choice, extra)

    def prompt_tokens_details(self, details: dict, state: RequestState) -> dict:
        return {"cached_tokens": state.choices[0].num_cached_tokens}


def render_completion_response(prepared: PreparedRequest, state: RequestState) -> bytes:
    """The non-streamed body (every field of docs/text-parity.md §6.2, nulls included)."""
    choices = []
    return_ids = prepared.return_token_ids
    for c in state.choices:
        out_ids = list(c.token_ids)
        positions: list = c.positions
        text = c.final_text()
        ids_for_logprobs = out_ids
        if prepared.echo:
            prompt_ids = c.choice.prompt_token_ids
            prompt_pos = c.prompt_positions or [None] * len(prompt_ids)
            prompt_text = c.choice.prompt_text or ""
            if prepared.echo_only:
                ids_for_logprobs, positions, text = prompt_ids, prompt_pos, prompt_text
            else:
                ids_for_logprobs = [*prompt_ids, *out_ids]
                positions = [*prompt_pos, *positions]
                text = prompt_text + text
        logprobs = None
        if prepared.logprobs is not None:
            logprobs = completion_logprobs(ids_for_logprobs, positions, prepared.logprobs,
                                           state.namer, py_floats=True)[0]
        prompt_logprobs = (None if c.prompt_positions is None else
                           prompt_logprobs_json(c.prompt_positions, state.ctx.tokenizer))
        choices.append({
            "index": c.choice.index, "text": text, "logprobs": logprobs,
            "finish_reason": c.finish_reason, "stop_reason": c.stop_reason,
            "token_ids": out_ids if return_ids else None, "prompt_logprobs": prompt_logprobs,
            "prompt_token_ids": c.choice.prompt_token_ids if return_ids else None,
            "routed_experts": None})
    usage = state.usage()
    if usage["prompt_tokens_details"] is not None:
        usage["prompt_tokens_details"]["created_cache_tokens"] = None
    return dumps({"id": prepared.request_id, "object": OBJECT, "created": prepared.created,
                  "model": prepared.model, "choices": choices, "service_tier": None,
                  "system_fingerprint": state.ctx.system_fingerprint, "usage": usage,
                  "kv_transfer_params": state.kv_transfer_params,
                  "ec_transfer_params": state.ec_transfer_params,
                  "metrics": request_metrics(state)})
