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

from typing import Sequence

from text.parsed import DeltaParts, ExtractedToolCalls, ToolCall, ToolCallDelta, tag_overlap
from text.tool_parsers.base import ToolParser, parts
from text.tool_parsers.ids import new_call_id
from text.tool_parsers.json_scan import Element, scan_object_array
from text.tool_parsers.registry import register_tool_parser

MARKERS = ("<|tool_call|>", "<tool_call>")
_WS = " \t\r\n"


def find_marker(text: str) -> tuple[int, int] | None:
    """(start, end) of the first marker in ``text``."""
    found = [(at, at + len(m)) for m in MARKERS if (at := text.find(m)) != -1]
    return min(found) if found else None


def _arguments(text: str, element: Element) -> str:
    """The verbatim text of an element's ``arguments`` object (so far); ``{}`` once a closed
    element has none."""
    args = element.members.get("arguments")
    if args is not None and args.kind == "object":
        return text[args.start:args.end] if args.end is not None else text[args.start:]
    return "{}" if element.end is not None else ""


def _named(text: str, elements: list[Element]) -> list[tuple[str | None, Element]]:
    return [(e.string(text, "name"), e) for e in elements]


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
        elements, _ = scan_object_array(text, array, strict=False)
        calls = [ToolCall(name, _arguments(text, e)) for name, e in _named(text, elements)
                 if name is not None]
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
        elements, closed = scan_object_array(text, array, strict=False)
        calls: list[ToolCallDelta] = []
        for index, (name, element) in enumerate(_named(text, elements)):
            if name is None:
                break
            if index >= self._announced:
                self._announced = index + 1
                self._open_call(index)
                calls.append(ToolCallDelta(index, id=new_call_id(), name=name))
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
