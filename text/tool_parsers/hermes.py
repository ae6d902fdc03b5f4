"""``hermes``: Hermes 2 Pro / Qwen 2.5 calls, ``<tool_call>{"name": …, "arguments": …}</tool_call>``.

Observable behaviour of vLLM 0.32's parser, restated:
- whole output: every ``<tool_call>`` region (closed, or running to the end) must hold a JSON
  object with ``name`` and ``arguments``; one that does not fails the lot (no calls, the output
  is content). Arguments are re-serialized (``json.dumps``, non-ASCII kept). Content is the
  text before the first ``<tool_call>`` (None when empty).
- streaming: the output is re-scanned on each delta. Content before the first ``<tool_call>`` is
  streamed, holding back a suffix that may be the start of the tag; a call is announced once its
  ``"name"`` is complete; its arguments stream as the raw text after ``"arguments":``, the
  object's closing brace dropped once the call is complete.

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import json
import re
from typing import Sequence

from text.parsed import (DeltaParts, ExtractedToolCalls, ToolCall, ToolCallDelta, is_json,
                         tag_overlap)
from text.tool_parsers.base import ToolParser, parts
from text.tool_parsers.ids import new_call_id
from text.tool_parsers.registry import register_tool_parser

START, END = "<tool_call>", "</tool_call>"
_REGION = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_ARGS = re.compile(r'"arguments"\s*:\s*')


@register_tool_parser("hermes")
class HermesToolParser(ToolParser):
    keep_special_tokens = True  # the markers are special tokens in some Hermes models

    def __init__(self, vocab, tools=None) -> None:
        super().__init__(vocab, tools)
        self._content_sent = 0
        self._names: list[str] = []
        self._in_calls = False  # content stops at the first <tool_call>
        self._scan_from = 0  # where the first region not yet closed and sent may start
        self._closed = 0  # regions before _scan_from
        #: (call index, where its arguments start in ``text``) while the output is inside one
        #: announced call whose arguments have begun and nothing is held back: see ``_stream``
        self._inside: tuple[int, int] | None = None

    def extract(self, text: str) -> ExtractedToolCalls:
        if START not in text:
            return ExtractedToolCalls([], text)
        try:
            calls = []
            for closed, open_ended in _REGION.findall(text):
                obj = json.loads(closed or open_ended)
                calls.append(ToolCall(obj["name"], json.dumps(obj["arguments"],
                                                              ensure_ascii=False)))
        except (ValueError, KeyError, TypeError):
            return ExtractedToolCalls([], text)
        content = text[:text.find(START)]
        return ExtractedToolCalls(calls, content or None)

    def _regions(self, text: str, pos: int) -> list[tuple[str, bool, int, int, int]]:
        """(call JSON text, complete, end of the region, where the region's text starts in
        ``text``, characters held back as a possible start of the closing tag) per
        ``<tool_call>`` region of ``text`` from ``pos``."""
        out = []
        while (start := text.find(START, pos)) != -1:
            body_start = start + len(START)
            end = text.find(END, body_start)
            if end != -1:
                pos = end + len(END)
                out.append((text[body_start:end].strip(), True, pos, body_start, 0))
                continue
            raw = text[body_start:]
            cut = tag_overlap(raw, END)
            body = (raw[:-cut] if cut else raw).strip()
            # PERF: only a body ending like an object or array can be complete JSON (a failed
            # json.loads per token was a third of the parser's time).
            out.append((body, body.endswith(("}", "]")) and is_json(body), -1, body_start, cut))
            break
        return out

    def _content(self, text: str) -> str | None:
        start = text.find(START, self._content_sent)
        limit = len(text) - tag_overlap(text, START) if start == -1 else start
        if limit <= self._content_sent:
            return None
        piece = text[self._content_sent:limit]
        self._content_sent = limit
        return piece

    def _stream(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        inside = self._inside
        if inside is not None and "<" not in delta_text:
            # PERF: inside one call's arguments, a delta without "<" can neither close the call
            # nor open another (nothing was held back), so the arguments so far are the text
            # from their start, as the full scan below finds them: 1.4 instead of 4.6 us per
            # token of the bench's tool-call stream (its every token is inside a call).
            index, args_at = inside
            raw = self.text[args_at:].rstrip()
            if not raw.endswith(("}", "]")):  # may be complete JSON: the full scan decides
                piece = self._args_delta(index, raw)
                return parts(None, [piece] if piece is not None else [])
        self._inside = None
        text = self.text
        content = None if self._in_calls else self._content(text)
        self._in_calls = self._in_calls or START in text
        calls: list[ToolCallDelta] = []
        # PERF: regions already closed and fully sent are not scanned again (vLLM re-scans the
        # whole output on every delta: 9x the detokenizer's cost per token at 256 tokens).
        regions = self._regions(text, self._scan_from)
        closed = self._closed  # the first region's index (``_closed`` moves inside the loop)
        for offset, (body, complete, end, body_start, held) in enumerate(regions):
            i = closed + offset
            if i >= len(self._names):
                match = _NAME.search(body)
                if match is None:
                    break  # a later call cannot be announced before this one
                name = match.group(1)
                self._names.append(name)
                self._open_call(i)
                calls.append(ToolCallDelta(index=i, id=new_call_id(), name=name))
            args = _ARGS.search(body)
            if args is not None:
                raw = body[args.end():]
                if complete:
                    raw = raw.rstrip()
                    if raw.endswith("}"):
                        raw = raw[:-1].rstrip()
                piece = self._args_delta(i, raw)
                if piece is not None:
                    calls.append(piece)
                # Once a non-space follows "arguments": (body is stripped), later text cannot
                # move where they start.
                if (len(regions) == 1 and end == -1 and not held and not complete
                        and args.end() < len(body)):
                    lead = body_start
                    while text[lead].isspace():  # body is stripped (str.strip's whitespace)
                        lead += 1
                    self._inside = (i, lead + args.end())
            if end != -1 and offset == 0:
                self._scan_from, self._closed = end, self._closed + 1
        return parts(content, calls)
