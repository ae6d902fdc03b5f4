"""Streamed ``/v1/messages``: chat deltas -> Anthropic's server-sent events (docs/messages.md §5).

Each event is ``event: <type>\\ndata: <json>\\n\\n``. The order is vLLM 0.32's: ``message_start``
(usage with the prompt's tokens) on the first engine output; then content blocks, each
``content_block_start``, its deltas (``thinking_delta`` and, before it stops, one
``signature_delta``; ``text_delta``; ``input_json_delta``) and ``content_block_stop``; a block
of another kind stops the open one. Text that arrives while a ``tool_use`` block is open is held
and written as its own text block after it. At the end: ``message_delta`` (stop reason, stop
sequence, usage), ``message_stop``.

``BlockEvents`` is the state machine (pure: tested on its own); ``MessagesStreamRenderer`` feeds
it each choice delta through chat's output parsers.

Runs on: the HTTP hub.
"""
from __future__ import annotations

import json
from typing import Any

from base.errors import ApiError
from base.jsonio import dumps
from resources.chat.parsing import ChoiceParser
from streaming.output import ChoiceDelta, RequestState
from streaming.prepared import PreparedRequest
from streaming.stream_renderer import StreamRenderer
from resources.messages.render import anthropic_usage, signature, stop_reason
from runtime.serving_context import ServingContext


def event(kind: str, body: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + dumps(body) + b"\n\n"


def error_event(exc: ApiError) -> bytes:
    """A failure after the stream began: vLLM's ``error`` event (type ``internal_error``)."""
    return event("error", {"type": "error",
                           "error": {"type": "internal_error", "message": exc.message}})


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class BlockEvents:
    """The content blocks of one streamed message."""

    def __init__(self) -> None:
        self.next_index = 0
        self.kind: str | None = None  # the open block's type
        self.signature: str | None = None  # an open thinking block's, until written
        self.tool_id: str | None = None
        self.held: list[str] = []  # text that came while a tool_use block was open
        self.ids: dict[int, str] = {}  # tool call index -> its id
        self.tool_used = False
        self.last_arguments: list[str] = []

    def _start(self, block: dict[str, Any]) -> bytes:
        out = event("content_block_start", {"type": "content_block_start",
                                            "content_block": block,
                                            "index": self.next_index})
        self.kind = block["type"]
        self.signature = signature() if self.kind == "thinking" else None
        self.tool_id = block.get("id") if self.kind == "tool_use" else None
        return out

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return event("content_block_delta", {"type": "content_block_delta", "delta": delta,
                                             "index": self.next_index})

    def _stop(self) -> bytes:
        if self.kind is None:
            return b""
        out = b""
        if self.signature is not None:
            out = self._delta({"type": "signature_delta", "signature": self.signature})
        out += event("content_block_stop", {"type": "content_block_stop",
                                            "index": self.next_index})
        self.kind = self.signature = self.tool_id = None
        self.next_index += 1
        return out

    def flush(self) -> bytes:
        """Stop the open block, then write the held text as a block of its own."""
        held, self.held = "".join(self.held), []
        out = self._stop()
        if held:
            out += (self._start({"type": "text", "text": ""})
                    + self._delta({"type": "text_delta", "text": held}) + self._stop())
        return out

    def reasoning(self, text: str | None) -> bytes:
        if not text:
            return b""
        out = b"" if self.kind == "thinking" else (
            self.flush() + self._start({"type": "thinking", "thinking": ""}))
        return out + self._delta({"type": "thinking_delta", "thinking": text})

    def content(self, text: str | None) -> bytes:
        if not text:
            return b""
        if self.kind == "tool_use":
            self.held.append(text)
            return b""
        out = b"" if self.kind == "text" else (
            self.flush() + self._start({"type": "text", "text": ""}))
        return out + self._delta({"type": "text_delta", "text": text})

    def tool_call(self, call_id: str | None, index: int, name: str | None,
                  arguments: str | None) -> bytes:
        out = b""
        if call_id is not None:
            self.ids[index] = call_id
            if self.tool_id != call_id and name is not None:
                out += self.flush()
                self.tool_used = True
                self.last_arguments = []
                out += self._start({"type": "tool_use", "id": call_id, "name": name,
                                    "input": {}})
        else:
            call_id = self.ids.get(index)
        if call_id is not None and arguments and self.tool_id == call_id:
            self.last_arguments.append(arguments)
            out += self._delta({"type": "input_json_delta", "partial_json": arguments})
        return out

    def tool_complete(self) -> bool:
        return self.tool_used and _is_json("".join(self.last_arguments))


class MessagesStreamRenderer(StreamRenderer):
    """Turns the deltas of one streamed message into Anthropic events."""

    def __init__(self, prepared: PreparedRequest, ctx: ServingContext) -> None:
        self.prepared = prepared
        self.started = False
        setup = prepared.chat_parsing
        self.parser = (None if setup is None else
                       ChoiceParser(setup, prepared.choices[0].prompt_token_ids))
        self.blocks = BlockEvents()
        self.finish_reason: str | None = None
        self.stop: int | str | None = None

    def _message_start(self, state: RequestState) -> bytes:
        p = self.prepared
        usage = anthropic_usage({"prompt_tokens": state.prompt_tokens(), "completion_tokens": 0})
        return event("message_start", {"type": "message_start", "message": {
            "id": p.request_id, "type": "message", "role": "assistant", "content": [],
            "model": p.model, "stop_reason": None, "stop_sequence": None, "usage": usage}})

    def chunk(self, choice_index: int, delta: ChoiceDelta | None, state: RequestState) -> bytes:
        """The events of one delta (``message_start`` before the first)."""
        out = b""
        if not self.started:
            self.started = True
            out = self._message_start(state)
        if delta is None:
            return out
        previous = delta.completion_tokens - len(delta.token_ids)
        if not delta.text and not delta.token_ids and not previous:
            return out
        finish_reason = delta.finish_reason
        if self.parser is None:
            reasoning, content, calls = None, delta.text, []
        else:
            parts = self.parser.delta(delta.text, delta.token_ids, finish_reason is not None)
            reasoning, content, calls = ((None, None, []) if parts is None else
                                         (parts.reasoning, parts.content, parts.tool_calls))
            if finish_reason is not None:
                finish_reason = self.parser.stream_finish_reason(finish_reason or "stop")
        if finish_reason is not None:
            self.finish_reason, self.stop = finish_reason, delta.stop_reason
        blocks = self.blocks
        out += blocks.reasoning(reasoning) + blocks.content(content)
        for call in calls:
            out += blocks.tool_call(call.id, call.index, call.name, call.arguments)
        return out

    def final_chunks(self, state: RequestState) -> bytes:
        """The open block's end, ``message_delta`` and ``message_stop``."""
        blocks = self.blocks
        out = blocks.flush()
        reason, sequence = stop_reason(self.finish_reason or "stop", self.stop,
                                       blocks.tool_used, blocks.tool_complete())
        usage = state.usage()
        out += event("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": reason,
                                                 "stop_sequence": sequence},
                                       "usage": anthropic_usage(usage)})
        return out + event("message_stop", {"type": "message_stop"})
