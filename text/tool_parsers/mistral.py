"""``mistral``: Mistral v11+ calls, ``[TOOL_CALLS]name[ARGS]{…}`` (or ``name{…}``), one
``[TOOL_CALLS]`` per call; with a tokenizer that has no ``[ARGS]`` token, the pre-v11 JSON array
form of ``text.tool_parsers.mistral_pre_v11`` (as vLLM 0.32 decides it).

Observable behaviour of vLLM 0.32's parser with a Hugging Face tokenizer, restated:
- text before the first ``[TOOL_CALLS]`` is content (None when only whitespace); each call's name
  runs to ``[ARGS]`` or the first ``{``; its arguments are the first JSON value of what follows
  (the text itself when it does not parse yet, ``{}`` when empty), text after it dropped.
  Ids are Mistral's: 9 random letters and digits. "required"/named choices are read the same
  way (this parser has no JSON-schema form).
- streaming: content as it arrives (whitespace-only content before a call is not sent); a call's
  first delta carries id, name and the arguments text so far, later ones the arguments text as it
  arrives, up to the next ``[TOOL_CALLS]`` (trailing text included).
- ``[THINK]…[/THINK]`` is left in the content (a reasoning parser handles it).

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import json
import random
import string
from typing import Sequence

from text.parsed import DeltaParts, ExtractedToolCalls, ToolCall, ToolCallDelta, tag_overlap
from text.tool_parsers import mistral_pre_v11
from text.tool_parsers.base import ToolParser, parts
from text.tool_parsers.registry import register_tool_parser

BOT, ARGS = "[TOOL_CALLS]", "[ARGS]"
_ALNUM = string.ascii_letters + string.digits
_ids = random.Random()


def mistral_call_id() -> str:
    return "".join(_ids.choice(_ALNUM) for _ in range(9))


def split_call(segment: str) -> tuple[str, str | None]:
    """(name, raw arguments or None while the name is still being written)."""
    if ARGS in segment:
        name, raw = segment.split(ARGS, 1)
        return name, raw
    brace = segment.find("{")
    if brace == -1:
        return segment, None
    return segment[:brace], segment[brace:]


def first_json(raw: str) -> str:
    stripped = raw.strip()
    if not stripped:
        return "{}"
    try:
        _, end = json.JSONDecoder().raw_decode(stripped)
    except ValueError:
        return stripped
    return stripped[:end]


@register_tool_parser("mistral")
class MistralToolParser(ToolParser):
    required_tokens = (BOT,)
    keep_special_tokens = True
    grammar_based = True
    supports_required_and_named = False

    def __init__(self, vocab, tools=None) -> None:
        super().__init__(vocab, tools)
        self._content_sent = 0
        self._announced = 0
        # vLLM 0.32 decides the format by the tokenizer: without an [ARGS] token it is pre-v11.
        self._pre_v11 = (mistral_pre_v11.PreV11Stream(mistral_call_id)
                         if ARGS not in vocab else None)

    def extract(self, text: str) -> ExtractedToolCalls:
        if self._pre_v11 is not None:
            return mistral_pre_v11.extract(text, mistral_call_id)
        if BOT not in text:
            return ExtractedToolCalls([], text)
        content, *segments = text.split(BOT)
        calls = []
        for segment in segments:
            name, raw = split_call(segment)
            calls.append(ToolCall(name, first_json(raw or ""), id=mistral_call_id()))
        return ExtractedToolCalls(calls, content if content.strip() else None)

    def _stream(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        if self._pre_v11 is not None:
            return self._pre_v11.step(self.text)
        text = self.text
        first = text.find(BOT)
        limit = first if first != -1 else len(text) - tag_overlap(text, BOT)
        content = None
        if limit > self._content_sent and text[:limit].strip():
            content, self._content_sent = text[self._content_sent:limit], limit
        if first == -1:
            return parts(content, [])
        calls: list[ToolCallDelta] = []
        for index, segment in enumerate(text[first + len(BOT):].split(BOT)):
            name, raw = split_call(segment)
            if raw is None:
                break
            raw = raw.lstrip()
            if index >= self._announced:
                self._announced = index + 1
                self._open_call(index)
                self.streamed_args[index] = raw
                calls.append(ToolCallDelta(index, id=mistral_call_id(), name=name, arguments=raw))
                continue
            piece = self._args_delta(index, raw)
            if piece is not None:
                calls.append(piece)
        return parts(content, calls)
