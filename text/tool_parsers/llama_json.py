"""``llama3_json`` / ``llama4_json``: Llama 3.x/4 JSON calls, ``{"name": …, "parameters": …}``,
optionally after ``<|python_tag|>``, several separated by ``; ``.

Observable behaviour of vLLM 0.32's parser, restated:
- whole output: every JSON object starting at a ``{`` (outside one already read) must decode and
  have ``name`` and ``arguments`` (or ``parameters``); any failure leaves the output as content
  with no calls. Found calls replace the content entirely (None); arguments are re-serialized.
- streaming: an output that does not start with ``<|python_tag|>`` or ``{`` is content. Otherwise
  the text is read as partial JSON objects (partial strings only once the name was sent); a call
  is announced by name, its arguments stream as the serialized arguments, held back to what two
  successive reads agree on until the object is complete. A new object flushes the previous
  call's remaining arguments. The special ``<|python_tag|>`` is dropped from the text (these
  parsers do not ask for special tokens).

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import partial_json_parser
from partial_json_parser.core.options import Allow

from text.parsed import DeltaParts, ExtractedToolCalls, ToolCall, ToolCallDelta, is_json
from text.tool_parsers.base import ToolParser
from text.tool_parsers.ids import new_call_id
from text.tool_parsers.registry import register_tool_parser

BOT = "<|python_tag|>"
_decoder = json.JSONDecoder()


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def partial_loads(text: str, flags: Allow) -> tuple[Any, int]:
    """(value, characters used) of the JSON at the start of ``text``, completing an unfinished
    value as the flags allow; a complete value followed by more text is read alone."""
    try:
        return partial_json_parser.loads(text, flags), len(text)
    except json.JSONDecodeError as exc:
        if "Extra data" in exc.msg:
            return _decoder.raw_decode(text)
        raise


def common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


@register_tool_parser("llama3_json")
class Llama3JsonToolParser(ToolParser):
    required_tokens = (BOT,)

    def __init__(self, vocab, tools=None) -> None:
        super().__init__(vocab, tools)
        self._current = -1
        self._name_sent = False
        self._previous: list[dict] = []

    def extract(self, text: str) -> ExtractedToolCalls:
        if BOT not in text and "{" not in text:
            return ExtractedToolCalls([], text)
        calls, end = [], -1
        for start in (i for i, ch in enumerate(text) if ch == "{"):
            if start <= end:
                continue
            try:
                obj, used = _decoder.raw_decode(text[start:])
                end = start + used
                args = obj["arguments"] if "arguments" in obj else obj["parameters"]
                calls.append(ToolCall(obj["name"], dumps(args)))
            except Exception:  # noqa: BLE001 - any failure keeps the output as content
                return ExtractedToolCalls([], text)
        return ExtractedToolCalls(calls, None) if calls else ExtractedToolCalls([], text)

    def _read_calls(self, text: str) -> tuple[list[dict], list[bool]] | None:
        flags = Allow.ALL if self._name_sent else Allow.ALL & ~Allow.STR
        calls, complete = [], []
        start = len(BOT) if text.startswith(BOT) else 0
        try:
            while start < len(text):
                obj, used = partial_loads(text[start:], flags)
                complete.append(is_json(text[start:start + used]))
                start += used + len("; ")
                if "parameters" in obj:
                    if "arguments" in obj:
                        return None  # both spellings: vLLM drops the delta
                    obj["arguments"] = obj["parameters"]
                calls.append(obj)
        except partial_json_parser.core.exceptions.MalformedJSON:
            return None
        return calls, complete

    def _stream(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        text = self.text
        if not (text.startswith(BOT) or text.startswith("{")):
            return DeltaParts(content=delta_text)
        try:
            return self._stream_calls(text)
        except Exception:  # noqa: BLE001 - vLLM skips a chunk it cannot read
            return None

    def _stream_calls(self, text: str) -> DeltaParts | None:
        read = self._read_calls(text)
        if read is None or not read[0]:
            return None
        calls, complete = read
        piece: ToolCallDelta | None = None
        if len(calls) > self._current + 1:  # a new object began
            if self._current >= 0:
                args = calls[self._current].get("arguments")
                if args:
                    piece = self._append(self._current, dumps(args)[len(
                        self.streamed_args[self._current]):])
            self._current = len(calls) - 1
            self._name_sent = False
            self._open_call(self._current)
            return DeltaParts(tool_calls=[piece]) if piece else None
        current = calls[self._current]
        if not self._name_sent:
            if current.get("name"):
                piece = ToolCallDelta(self._current, id=new_call_id(), name=current["name"])
                self._name_sent = True
        elif current.get("arguments"):
            sent = len(self.streamed_args[self._current])
            now = dumps(current["arguments"])
            before = self._previous[self._current].get("arguments")
            if complete[self._current]:
                piece = self._append(self._current, now[sent:])
            elif before and dumps(before) != now:
                piece = self._append(self._current, common_prefix(dumps(before), now)[sent:])
        self._previous = calls
        return DeltaParts(tool_calls=[piece]) if piece else None

    def _append(self, index: int, fragment: str) -> ToolCallDelta:
        self.streamed_args[index] += fragment
        return ToolCallDelta(index, arguments=fragment)

    def finish(self) -> str:
        if not self._previous:
            return ""
        last = len(self._previous) - 1
        args = self._previous[last].get("arguments", {})
        expected = args if isinstance(args, str) else dumps(args)
        sent = self.streamed_args[last] if last < len(self.streamed_args) else ""
        return expected[len(sent):] if expected.startswith(sent) else ""


register_tool_parser("llama4_json")(type("Llama4JsonToolParser", (Llama3JsonToolParser,), {}))
