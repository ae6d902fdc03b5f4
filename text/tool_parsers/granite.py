"""``granite``: Granite 3.0/3.1 calls, a JSON array after ``<|tool_call|>`` (a special token) or
``<tool_call>`` (text): ``<|tool_call|>[{"name": …, "arguments": {…}}, …]``.

Observable behaviour of vLLM 0.32's parser, restated:
- text before the marker is content; the array's elements are the calls (name from ``name``,
  arguments the verbatim text of the ``arguments`` object, ``{}`` when there is none, the text so
  far when the output ends inside it); after the closing ``]`` the text is content again.
  A marker not followed by ``[`` is dropped and the rest is content.
- whole output with calls: the content is the text before the marker, stripped (None when
  empty); without calls it is the text with the marker removed.
- streaming: content as it arrives; a call is announced once its name is complete, then its
  arguments text streams as it grows.

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import json
from typing import Sequence

from text.parsed import DeltaParts, ExtractedToolCalls, ToolCall, ToolCallDelta, tag_overlap
from text.tool_parsers.base import ToolParser, parts
from text.tool_parsers.ids import new_call_id
from text.tool_parsers.registry import register_tool_parser

MARKERS = ("<|tool_call|>", "<tool_call>")
_WS = " \t\r\n"


def find_marker(text: str) -> tuple[int, int] | None:
    """(start, end) of the first marker in ``text``."""
    found = [(at, at + len(m)) for m in MARKERS if (at := text.find(m)) != -1]
    return min(found) if found else None


class _Element:
    """One array element: its name once read, the span of its ``arguments`` object."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.end: int | None = None
        self.name: str | None = None
        self.args: tuple[int, int | None] | None = None


def scan_array(text: str, start: int) -> tuple[list[_Element], int | None]:
    """The elements of the array opening at ``text[start]`` and the index after its ``]``
    (None while it is open). String-aware; only depth-1 keys are read."""
    elements: list[_Element] = []
    depth, in_string, escaped, key_start, last_key = 0, False, False, 0, None
    current: _Element | None = None
    expect_value_of: str | None = None
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                if depth == 2 and current is not None:
                    literal = text[key_start:i + 1]
                    if expect_value_of == "name":
                        try:
                            current.name = json.loads(literal)
                        except ValueError:
                            pass
                        expect_value_of = None
                    else:
                        last_key = literal[1:-1]
            continue
        if ch == '"':
            in_string, key_start = True, i
        elif ch == ":" and depth == 2 and current is not None:
            expect_value_of = last_key
        elif ch in "{[":
            if depth == 1 and ch == "{":
                current = _Element(i)
                elements.append(current)
            elif depth == 2 and current is not None and expect_value_of == "arguments" \
                    and ch == "{":
                current.args = (i, None)
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 2 and current is not None and current.args and current.args[1] is None:
                current.args = (current.args[0], i + 1)
                expect_value_of = None
            elif depth == 1 and current is not None:
                current.end = i + 1
                current = None
            elif depth == 0:
                return elements, i + 1
        elif ch not in _WS and ch != "," and depth == 2 and expect_value_of == "arguments":
            expect_value_of = None  # not an object: no arguments span
    return elements, None


def _arguments(text: str, element: _Element) -> str:
    if element.args is not None:
        begin, end = element.args
        return text[begin:end] if end is not None else text[begin:]
    return "{}" if element.end is not None else ""


@register_tool_parser("granite")
class GraniteToolParser(ToolParser):
    keep_special_tokens = True
    grammar_based = True  # <|tool_call|> is a special token

    def __init__(self, vocab, tools=None) -> None:
        super().__init__(vocab, tools)
        self._content_sent = 0
        self._after_sent: int | None = None
        self._announced = 0

    def _region(self, text: str) -> tuple[int, int, int | None] | None:
        """(marker start, marker end, array start or None when no array follows)."""
        marker = find_marker(text)
        if marker is None:
            return None
        at = marker[1]
        while at < len(text) and text[at] in _WS:
            at += 1
        return marker[0], marker[1], (at if at < len(text) and text[at] == "[" else None)

    def extract(self, text: str) -> ExtractedToolCalls:
        region = self._region(text)
        if region is None:
            return ExtractedToolCalls([], text)
        begin, end, array = region
        if array is None:
            return ExtractedToolCalls([], (text[:begin] + text[end:]) or None)
        elements, _ = scan_array(text, array)
        calls = [ToolCall(e.name, _arguments(text, e)) for e in elements if e.name is not None]
        if not calls:
            return ExtractedToolCalls([], (text[:begin] + text[end:]) or None)
        return ExtractedToolCalls(calls, text[:begin].strip() or None)

    def _stream(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        text = self.text
        region = self._region(text)
        if region is None:
            limit = len(text) - max(tag_overlap(text, m) for m in MARKERS)
            return parts(self._send_content(text, limit), [])
        begin, end, array = region
        content = self._send_content(text, begin) or ""
        if array is None:
            if len(text) - end > 0 and text[end:].strip(_WS):
                if self._after_sent is None:
                    self._after_sent = end
                content += self._send_after(text, len(text))
            return parts(content, [])
        elements, closed = scan_array(text, array)
        calls: list[ToolCallDelta] = []
        for index, element in enumerate(elements):
            if element.name is None:
                break
            if index >= self._announced:
                self._announced = index + 1
                self._open_call(index)
                calls.append(ToolCallDelta(index, id=new_call_id(), name=element.name))
            piece = self._args_delta(index, _arguments(text, element))
            if piece is not None:
                calls.append(piece)
        if closed is not None:
            if self._after_sent is None:
                self._after_sent = closed
            content += self._send_after(text, len(text))
        return parts(content, calls)

    def _send_content(self, text: str, limit: int) -> str | None:
        if limit <= self._content_sent:
            return None
        piece, self._content_sent = text[self._content_sent:limit], limit
        return piece

    def _send_after(self, text: str, limit: int) -> str:
        piece, self._after_sent = text[self._after_sent:limit], limit
        return piece
