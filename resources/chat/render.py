"""/v1/chat/completions bytes: stream chunks and the non-streamed body, as vLLM 0.32 writes them.

Stream (docs/text-parity.md §6.3): on the request's first engine output, one role chunk per choice
(``{"role": …, "content": ""}`` with ``prompt_token_ids``/``prompt_text`` keys) and, with echo,
one content chunk per choice carrying the echoed text; then one chunk per delta (``token_ids``
key always present; ``stop_reason`` only on the terminal chunk); a usage chunk; ``[DONE]``.
Non-streamed (docs/text-parity.md §6.2): every field, ``tool_calls`` omitted from the message.

Called by: ``resources/generate_resource.py`` and the bodies in ``streaming/body.py``, with a
``RequestState``.
Runs on: the HTTP hub.
"""
from __future__ import annotations

from typing import Any

from jsonio import dumps
from runtime.serving_context import ServingContext
from resources.common.logprobs import chat_logprobs, prompt_logprobs_json
from resources.common.output import ChoiceDelta, RequestState
from resources.common.prepared import PreparedRequest
from resources.common.sse import frame
from resources.common.stream_renderer import StreamRenderer

CHUNK_OBJECT = "chat.completion.chunk"


class ChatStreamRenderer(StreamRenderer):
    """Turns ``ChoiceDelta``s of one streamed chat completion into SSE frames."""

    OBJECT = CHUNK_OBJECT

    def __init__(self, prepared: PreparedRequest, ctx: ServingContext) -> None:
        super().__init__(prepared, ctx)
        self.started = False

    def _zero_usage(self, state: RequestState) -> dict:
        prompt = state.prompt_tokens()
        return {"prompt_tokens": prompt, "total_tokens": prompt, "completion_tokens": 0,
                "completion_tokens_details": None}

    def _opening(self, state: RequestState) -> bytes:
        """Role chunks for every choice, then echo chunks (vLLM's first iteration)."""
        p = self.prepared
        out = []
        prompt_ids = state.choices[0].choice.prompt_token_ids if p.return_token_ids else None
        for c in state.choices:
            body: dict[str, Any] = {**self.head, "choices": [{
                "index": c.choice.index, "delta": {"role": p.response_role, "content": ""},
                "logprobs": None, "finish_reason": None}]}
            if p.continuous_usage:
                body["usage"] = self._zero_usage(state)
            body["prompt_token_ids"] = prompt_ids
            body["prompt_text"] = p.prompt_text
            out.append(frame(body))
        if p.echo and p.echo_content:
            for c in state.choices:
                body = {**self.head, "choices": [{
                    "index": c.choice.index, "delta": {"content": p.echo_content},
                    "logprobs": None, "finish_reason": None}]}
                if p.continuous_usage:
                    body["usage"] = self._zero_usage(state)
                out.append(frame(body))
        return b"".join(out)

    def chunk(self, choice_index: int, delta: ChoiceDelta | None, state: RequestState) -> bytes:
        """The frames for one delta (with the opening chunks before the first one)."""
        opening = b""
        if not self.started:
            self.started = True
            opening = self._opening(state)
        if delta is None:
            return opening
        p = self.prepared
        previous = delta.completion_tokens - len(delta.token_ids)
        if not delta.text and not delta.token_ids and not previous:
            return opening  # vLLM skips empty steps before the first token
        choice: dict[str, Any] = {"index": delta.index, "delta": {"content": delta.text},
                                  "logprobs": delta.logprobs}
        if delta.finish_reason is None:
            choice["finish_reason"] = None
        else:
            choice["finish_reason"] = delta.finish_reason or "stop"
            choice["stop_reason"] = delta.stop_reason
        choice["token_ids"] = delta.token_ids if p.return_token_ids else None
        body: dict[str, Any] = {**self.head, "choices": [choice]}
        if p.continuous_usage:
            prompt = state.prompt_tokens()
            body["usage"] = {"prompt_tokens": prompt,
                             "total_tokens": prompt + delta.completion_tokens,
                             "completion_tokens": delta.completion_tokens,
                             "completion_tokens_details": None}
        if (not p.include_usage and self.fingerprint is not None
                and delta.finish_reason is not None):
            body["system_fingerprint"] = self.fingerprint
        return opening + frame(body)

    def prompt_tokens_details(self, details: dict, state: RequestState) -> dict:
        return {k: v for k, v in details.items() if v is not None}


def render_chat_response(prepared: PreparedRequest, state: RequestState) -> bytes:
    """The non-streamed body (every field of docs/text-parity.md §6.2, nulls included)."""
    choices = []
    for c in state.choices:
        logprobs = None
        if prepared.logprobs is not None:
            logprobs = chat_logprobs(c.token_ids, c.positions, prepared.logprobs, state.namer,
                                     py_floats=True)
        content = c.final_text()
        if prepared.echo:
            content = prepared.echo_content + content
        choices.append({
            "index": c.choice.index,
            "message": {"role": prepared.response_role, "content": content, "refusal": None,
                        "annotations": None, "audio": None, "function_call": None,
                        "reasoning": None},
            "logprobs": logprobs, "finish_reason": c.finish_reason or "stop",
            "stop_reason": c.stop_reason,
            "token_ids": list(c.token_ids) if prepared.return_token_ids else None,
            "routed_experts": None})
    first = state.choices[0]
    prompt_logprobs = (None if first.prompt_positions is None else
                       prompt_logprobs_json(first.prompt_positions, state.ctx.tokenizer))
    return dumps({
        "id": prepared.request_id, "object": "chat.completion", "created": prepared.created,
        "model": prepared.model, "choices": choices, "service_tier": None,
        "system_fingerprint": state.ctx.system_fingerprint, "usage": state.usage(),
        "prompt_logprobs": prompt_logprobs,
        "prompt_token_ids": first.choice.prompt_token_ids if prepared.return_token_ids else None,
        "prompt_text": prepared.prompt_text, "kv_transfer_params": None,
        "ec_transfer_params": None, "metrics": None})
