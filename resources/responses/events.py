"""/v1/responses stream: the SSE events of vLLM 0.32, in its order.

``response.created``, ``response.in_progress``; then per output item ``output_item.added``,
(``content_part.added``, the ``output_text``/``reasoning_text`` deltas, their ``done``,
``content_part.done``) or the ``function_call_arguments`` deltas and ``done``, and
``output_item.done``; finally ``response.completed`` (also for an incomplete response, as vLLM
does), carrying every item that was streamed. An item ends when the next kind of output starts,
so the parser's whitespace between a thought and a call is its own message item, as in vLLM's
streams (the non-streamed answer drops it). Every event is ``event: <type>`` plus ``data:``.

Runs on: the HTTP hub (one renderer per stream, never shared).
"""
from __future__ import annotations

from typing import Any, Callable

from base.jsonio import dumps
from resources.chat.parsing import ChoiceParser
from streaming.output import ChoiceDelta, RequestState
from streaming.stream_renderer import StreamRenderer
from resources.responses.render import (call_item, item_id, message_item, reasoning_item,
                                        status_of, usage_of)
from resources.responses.shell import response_object
from runtime.serving_context import ServingContext
from text.parsed import DeltaParts
from text.tool_parsers.ids import new_call_id


def event(kind: str, body: dict) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + dumps(body) + b"\n\n"


class ResponsesStreamRenderer(StreamRenderer):
    """Turns one request's ``ChoiceDelta``s into Responses events."""

    def __init__(self, prepared: Any, ctx: ServingContext) -> None:
        self.prepared = prepared
        setup = prepared.chat_parsing
        self.parser = (None if setup is None
                       else ChoiceParser(setup, prepared.choices[0].prompt_token_ids))
        self.seq = 0
        self.started = False
        self.items: list[dict] = []
        #: the open item: ("reasoning" | "message" | "call", item, accumulated text, call index)
        self.open: list | None = None
        #: stores the final response before ``response.completed`` is sent (None: not stored)
        self.on_response: Callable[[dict], None] | None = getattr(prepared, "save", None)

    def _emit(self, out: list[bytes], kind: str, body: dict, tail: dict | None = None) -> None:
        body["sequence_number"] = self.seq
        body["type"] = kind
        if tail:  # keys vLLM's event models declare after ``type``
            body.update(tail)
        self.seq += 1
        out.append(event(kind, body))

    def _response_event(self, out: list[bytes], kind: str, response: dict) -> None:
        self._emit(out, kind, {"response": response})

    # -- items ------------------------------------------------------------------------------

    def _start(self, out: list[bytes], kind: str, item: dict, index: int | None = None) -> None:
        self._close(out)
        position = len(self.items)
        self.open = [kind, item, "", index]
        self._emit(out, "response.output_item.added", {"item": item, "output_index": position})
        if kind == "reasoning":
            part: dict = {"text": "", "type": "reasoning_text"}
        elif kind == "message":
            part = {"annotations": [], "text": "", "type": "output_text", "logprobs": []}
        else:
            return
        self._emit(out, "response.content_part.added", {
            "content_index": 0, "item_id": item["id"], "output_index": position, "part": part})

    def _delta(self, out: list[bytes], text: str) -> None:
        kind, item = self.open[0], self.open[1]
        self.open[2] += text
        where = {"item_id": item["id"], "output_index": len(self.items)}
        if kind == "message":
            self._emit(out, "response.output_text.delta", {
                "content_index": 0, "delta": text, "item_id": item["id"], "logprobs": [],
                "output_index": len(self.items)})
        elif kind == "reasoning":
            self._emit(out, "response.reasoning_text.delta", {
                "content_index": 0, "delta": text, **where})
        else:
            self._emit(out, "response.function_call_arguments.delta", {"delta": text, **where})

    def _close(self, out: list[bytes]) -> None:
        if self.open is None:
            return
        kind, item, text, _ = self.open
        self.open = None
        position = len(self.items)
        where = {"item_id": item["id"], "output_index": position}
        if kind == "reasoning":
            self._emit(out, "response.reasoning_text.done", {"content_index": 0, **where,
                                                             "text": text})
            self._emit(out, "response.content_part.done", {
                "content_index": 0, **where, "part": {"text": text, "type": "reasoning_text"}})
            done = reasoning_item(item["id"], text, "completed")
        elif kind == "message":
            self._emit(out, "response.output_text.done", {
                "content_index": 0, "item_id": item["id"], "logprobs": [],
                "output_index": position, "text": text})
            done = message_item(item["id"], text)
            self._emit(out, "response.content_part.done", {
                "content_index": 0, **where, "part": done["content"][0]})
        else:
            done = call_item(item["id"], item["call_id"], item["name"], text, "completed")
            self._emit(out, "response.function_call_arguments.done",
                       {"arguments": text, **where}, {"name": item["name"]})
        self._emit(out, "response.output_item.done", {"item": done, "output_index": position})
        self.items.append(done)

    def _feed(self, out: list[bytes], parts: DeltaParts) -> None:
        if parts.reasoning:
            if self.open is None or self.open[0] != "reasoning":
                self._start(out, "reasoning", {"id": item_id("rs"), "summary": [],
                                               "type": "reasoning", "content": None,
                                               "encrypted_content": None,
                                               "status": "in_progress"})
            self._delta(out, parts.reasoning)
        if parts.content:
            if self.open is None or self.open[0] != "message":
                self._start(out, "message", message_item(item_id("msg"), None, "in_progress"))
            self._delta(out, parts.content)
        for call in parts.tool_calls:
            if self.open is None or self.open[0] != "call" or self.open[3] != call.index:
                item = call_item(item_id("fc"), call.id or new_call_id(), call.name or "", "",
                                 "in_progress")
                self._start(out, "call", item, call.index)
            if call.arguments:
                self._delta(out, call.arguments)

    # -- the StreamingBody interface ------------------------------------------------------------

    def chunk(self, index: int, delta: ChoiceDelta | None, state: RequestState) -> bytes:
        out: list[bytes] = []
        if not self.started:
            self.started = True
            shell = self.prepared.shell
            self._response_event(out, "response.created", shell)
            self._response_event(out, "response.in_progress", shell)
        if delta is None:
            return b"".join(out)
        if self.parser is None:
            parts = DeltaParts(content=delta.text) if delta.text else None
        else:
            parts = self.parser.delta(delta.text, delta.token_ids,
                                      delta.finish_reason is not None)
        if parts is not None:
            self._feed(out, parts)
        return b"".join(out)

    def final_chunks(self, state: RequestState) -> bytes:
        out: list[bytes] = []
        if not self.started:
            out.append(self.chunk(0, None, state))
        self._close(out)
        reasoning = (0 if self.parser is None
                     else self.parser.reasoning_tokens(state.choices[0].token_ids))
        response = response_object(self.prepared.shell, list(self.items), status_of(state),
                                   usage_of(state, reasoning), state.kv_transfer_params)
        if self.on_response is not None:
            self.on_response(response)
        self._response_event(out, "response.completed", response)
        return b"".join(out)
