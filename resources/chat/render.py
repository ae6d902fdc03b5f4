"""/v1/chat/completions bytes: stream chunks and the non-streamed body, as vLLM 0.32 writes them.

Stream (docs/text-parity.md §6.3): on the request's first engine output, one role chunk per choice
(``{"role": …, "content": ""}`` with ``prompt_token_ids``/``prompt_text`` keys) and, with echo,
one content chunk per choice carrying the echoed text; then one chunk per delta (``token_ids``
key always present; ``stop_reason`` only on the terminal chunk); a usage chunk; ``[DONE]``.
Non-streamed (docs/text-parity.md §6.2): every field; ``tool_calls`` only when the tool pipeline ran.
With output parsers (``resources.chat.parsing``) each choice's text goes through its
``ChoiceParser``: reasoning, content and tool calls, streamed and whole.

Called by: ``resources/generate_resource.py`` and the bodies in ``streaming/body.py``, with a
``RequestState``.
Runs on: the HTTP hub.
"""
from __future__ import annotations

from typing import Any

from base.jsonio import dumps
from runtime.serving_context import ServingContext
from streaming.request_metrics import request_metrics
from streaming.logprobs import chat_logprobs, prompt_logprobs_json
from streaming.output import ChoiceDelta, RequestState
from streaming.prepared import PreparedRequest
from streaming.sse import frame
from streaming.stream_renderer import ChunkStreamRenderer
from text.tool_parsers.ids import new_call_id
from resources.chat.parsing import ChoiceParser, delta_json

CHUNK_OBJECT = "chat.completion.chunk"


class ChatStreamRenderer(ChunkStreamRenderer):
    """Turns ``ChoiceDelta``s of one streamed chat completion into SSE frames."""

    OBJECT = CHUNK_OBJECT

    def __init__(self, prepared: PreparedRequest, ctx: ServingContext) -> None:
        super().__init__(prepared, ctx)
        self.started = False
        setup = prepared.chat_parsing
        #: one parser per choice (index = choice index), or None without output parsers; a
        #: beam search has one prepared choice and ``n`` beams, each parsed on its own
        choices = (prepared.choices * prepared.n if prepared.beam is not None
                   else prepared.choices)
        self.parsers = None if setup is None else [
            ChoiceParser(setup, c.prompt_token_ids) for c in choices]
        self.reasoning_details = setup is not None and setup.parsers.reasoning_parser is not None
        # vLLM hides per-token metadata while it hides reasoning (it could leak the thought).
        self.hide_metadata = setup is not None and not setup.include_reasoning

    def _zero_usage(self, state: RequestState) -> dict:
        prompt = state.prompt_tokens()
        return {"prompt_tokens": prompt, "total_tokens": prompt, "completion_tokens": 0,
                "completion_tokens_details": self._details(0)}

    def _details(self, reasoning_tokens: int) -> dict | None:
        return {"reasoning_tokens": reasoning_tokens} if self.reasoning_details else None

    def completion_tokens_details(self, state: RequestState) -> dict | None:
        if not self.reasoning_details:
            return None
        return self._details(sum(p.reasoning_tokens(c.token_ids)
                                 for p, c in zip(self.parsers, state.choices)))

    def _opening(self, state: RequestState) -> bytes:
        """Role chunks for every choice, then echo chunks (vLLM's first iteration: one per
        requested choice, even when a beam search returns fewer beams)."""
        p = self.prepared
        out = []
        prompt_ids = p.choices[0].prompt_token_ids if p.return_token_ids else None
        indices = range(p.n) if p.beam is not None else [c.choice.index for c in state.choices]
        for index in indices:
            body: dict[str, Any] = {**self.head, "choices": [{
                "index": index, "delta": {"role": p.response_role, "content": ""},
                "logprobs": None, "finish_reason": None}]}
            if p.continuous_usage:
                body["usage"] = self._zero_usage(state)
            body["prompt_token_ids"] = prompt_ids
            body["prompt_text"] = p.prompt_text
            out.append(frame(body))
        if p.echo and p.echo_content:
            for index in indices:
                body = {**self.head, "choices": [{
                    "index": index, "delta": {"content": p.echo_content},
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
        finish_reason = delta.finish_reason
        logprobs = None if self.hide_metadata else delta.logprobs
        if self.parsers is None:
            message: dict[str, Any] = {"content": delta.text}
        else:
            parser = self.parsers[delta.index]
            parts = parser.delta(delta.text, delta.token_ids, finish_reason is not None)
            if parts is None and finish_reason is None and logprobs is None and (
                    not p.return_token_ids or self.hide_metadata):
                return opening  # nothing to show yet (a marker, a held-back tag)
            message = {} if parts is None else delta_json(parts)
            if finish_reason is not None:
                finish_reason = parser.stream_finish_reason(finish_reason or "stop")
        choice: dict[str, Any] = {"index": delta.index, "delta": message, "logprobs": logprobs}
        if finish_reason is None:
            choice["finish_reason"] = None
        else:
            choice["finish_reason"] = finish_reason or "stop"
            choice["stop_reason"] = delta.stop_reason
        choice["token_ids"] = (delta.token_ids if p.return_token_ids and not self.hide_metadata
                               else None)
        extra: dict[str, Any] = {}
        if p.continuous_usage:
            prompt = state.prompt_tokens()
            details = None
            if self.reasoning_details:
                choice_state = state.choices[delta.index]
                details = self._details(self.parsers[delta.index].reasoning_tokens(
                    choice_state.token_ids))
            extra["usage"] = {"prompt_tokens": prompt,
                              "total_tokens": prompt + delta.completion_tokens,
                              "completion_tokens": delta.completion_tokens,
                              "completion_tokens_details": details}
        if (not p.include_usage and self.fingerprint is not None
                and delta.finish_reason is not None):
            extra["system_fingerprint"] = self.fingerprint
        return opening + self.event(choice, extra)

    def prompt_tokens_details(self, details: dict, state: RequestState) -> dict:
        return {k: v for k, v in details.items() if v is not None}

    def finished_frames(self, state: RequestState) -> bytes:
        """A whole stream of finished choices (a beam search, ``resources.common.beam``): the
        opening chunks, one chunk per choice with all its text, tokens and logprobs, then the
        usage chunk and ``[DONE]``, as vLLM's stream writer renders the one final output its
        beam search yields."""
        p = self.prepared
        out = [] if self.started else [self._opening(state)]
        self.started = True
        for c in state.choices:
            ids = list(c.token_ids)
            logprobs = None
            if p.logprobs is not None:
                logprobs = chat_logprobs(ids, c.positions, p.logprobs, state.namer, stream=True,
                                         token_bytes=p.beam is None)
            delta = ChoiceDelta(c.choice.index, c.final_text(), ids, logprobs, c.finish_reason,
                                c.stop_reason, False, True, len(ids))
            out.append(self.chunk(c.choice.index, delta, state))
        out.append(self.final_chunks(state))
        return b"".join(out)


def final_message(prepared: PreparedRequest, c: Any, parser: ChoiceParser | None
             ) -> tuple[dict[str, Any], str]:
    """(message, finish_reason) of one finished choice (``resources.messages`` builds its
    content blocks from it too)."""
    finish_reason = c.finish_reason or "stop"
    text = c.final_text()
    if parser is None:
        content, reasoning, calls = text, None, None
    else:
        parsed = parser.final(text, finish_reason)
        content, reasoning, calls = parsed.content, parsed.reasoning, parsed.tool_calls
        finish_reason = parsed.finish_reason
    if prepared.echo:
        content = prepared.echo_content + (content or "")
    message: dict[str, Any] = {"role": prepared.response_role, "content": content,
                               "refusal": None, "annotations": None, "audio": None,
                               "function_call": None}
    if calls:  # vLLM leaves an empty list out
        message["tool_calls"] = [
            {"id": call.id or new_call_id(), "type": "function",
             "function": {"name": call.name, "arguments": call.arguments}} for call in calls]
    message["reasoning"] = reasoning
    return message, finish_reason


def render_chat_response(prepared: PreparedRequest, state: RequestState) -> bytes:
    """The non-streamed body (every field of docs/text-parity.md §6.2, nulls included)."""
    setup = prepared.chat_parsing
    hide_metadata = setup is not None and not setup.include_reasoning
    choices = []
    reasoning_tokens = 0
    for c in state.choices:
        parser = None if setup is None else ChoiceParser(setup, c.choice.prompt_token_ids)
        logprobs = None
        if prepared.logprobs is not None and not hide_metadata:
            logprobs = chat_logprobs(c.token_ids, c.positions, prepared.logprobs, state.namer,
                                     py_floats=True, token_bytes=prepared.beam is None)
        message, finish_reason = final_message(prepared, c, parser)
        if parser is not None:
            reasoning_tokens += parser.reasoning_tokens(c.token_ids)
        choices.append({
            "index": c.choice.index, "message": message, "logprobs": logprobs,
            "finish_reason": finish_reason, "stop_reason": c.stop_reason,
            "token_ids": (list(c.token_ids) if prepared.return_token_ids and not hide_metadata
                          else None),
            "routed_experts": None})
    first = state.choices[0]
    prompt_logprobs = (None if first.prompt_positions is None else
                       prompt_logprobs_json(first.prompt_positions, state.ctx.tokenizer))
    usage = state.usage()
    if setup is not None and setup.parsers.reasoning_parser is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return dumps({
        "id": prepared.request_id, "object": "chat.completion", "created": prepared.created,
        "model": prepared.model, "choices": choices, "service_tier": None,
        "system_fingerprint": state.ctx.system_fingerprint, "usage": usage,
        "prompt_logprobs": prompt_logprobs,
        "prompt_token_ids": first.choice.prompt_token_ids if prepared.return_token_ids else None,
        "prompt_text": prepared.prompt_text, "kv_transfer_params": state.kv_transfer_params,
        "ec_transfer_params": state.ec_transfer_params, "metrics": request_metrics(state)})
