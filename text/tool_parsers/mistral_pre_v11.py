"""``mistral`` with a pre-v11 tokenizer: ``[TOOL_CALLS][{"name": …, "arguments": {…}}, …]``.

vLLM 0.32 decides the format from the tokenizer: a Hugging Face tokenizer whose vocabulary has
no ``[ARGS]`` token is pre-v11 (greenfront always loads Hugging Face tokenizers). Its observable
behaviour there, restated:
- whole output: content is the text before the first ``[TOOL_CALLS]`` (None when only
  whitespace); the calls are the first JSON value of the first non-empty segment after a marker
  (else the first ``[{…}]`` in it): an array of call objects or one bare object; entries that
  are no object or have neither ``name`` nor ``arguments`` are skipped, a missing or non-string
  name is ``""``, arguments absent/null are ``{}``, a string is kept as it is, anything else is
  JSON-encoded (``json.dumps`` spacing). No call read: the answer is content, the JSON text.
- streaming: text before the marker streams as content as it comes; after it, each call as
  ``json_events.scan_calls`` reads it (name when its string is complete, arguments as the raw
  text of the object), then text after the closed array streams as content.

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import json
import re
from typing import Any

from text.parsed import DeltaParts, ExtractedToolCalls, ToolCall, ToolCallDelta
from text.tool_parsers.json_events import scan_calls

BOT = "[TOOL_CALLS]"
_ARRAY = re.compile(r"\[{.*}\]", re.DOTALL)


def _calls_of(parsed: Any, new_id) -> list[ToolCall]:
    items = [parsed] if isinstance(parsed, dict) else parsed if isinstance(parsed, list) else []
    calls = []
    for item in items:
        if not isinstance(item, dict) or ("name" not in item and "arguments" not in item):
            continue
        name, arguments = item.get("name"), item.get("arguments")
        if arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(ToolCall(name if isinstance(name, str) else "", arguments, id=new_id()))
    return calls


def extract(text: str, new_id) -> ExtractedToolCalls:
    """A whole output, as vLLM's pre-v11 extraction reads it."""
    if BOT not in text:
        return ExtractedToolCalls([], text)
    content, *segments = text.split(BOT)
    raw = next((s.strip() for s in segments if s.strip()), "")
    try:
        parsed, _ = json.JSONDecoder().raw_decode(raw)
    except ValueError:
        found = _ARRAY.findall(raw)
        try:
            parsed = json.loads(found[0]) if found else None
        except ValueError:
            parsed = None
    calls = _calls_of(parsed, new_id)
    if not calls:
        return ExtractedToolCalls([], raw, tools_called=False)
    return ExtractedToolCalls(calls, content if content.strip() else None)


class PreV11Stream:
    """The streaming state of one choice: what each call has sent so far."""

    def __init__(self, new_id) -> None:
        self._new_id = new_id
        self._content_sent = 0
        # per call index (vLLM numbers every call object, even one that never sends anything)
        self._names: dict[int, str | None] = {}
        self._args: dict[int, str] = {}
        self._tail_sent = 0

    def step(self, text: str) -> DeltaParts | None:
        """The delta for the whole text so far (``text`` only grows)."""
        first = text.find(BOT)
        limit = first if first != -1 else len(text)
        content = text[self._content_sent:limit] or None
        self._content_sent = max(self._content_sent, limit)
        if first == -1:
            return DeltaParts(content=content) if content else None
        body = text[first + len(BOT):].replace(BOT, "")
        found = scan_calls(body)
        calls = [d for i, call in enumerate(found.calls)
                 if (d := self._call_delta(i, call, body)) is not None]
        if found.end is not None and len(body) > found.end + self._tail_sent:
            content = (content or "") + body[found.end + self._tail_sent:]
            self._tail_sent = len(body) - found.end
        if not content and not calls:
            return None
        return DeltaParts(content=content or None, tool_calls=calls)

    def _call_delta(self, index: int, call, body: str) -> ToolCallDelta | None:
        if call.args_string is not None:
            args = call.args_string
        elif call.args_start is not None:
            args = body[call.args_start:call.args_end]
        else:
            args = ""
        if index not in self._names:
            if call.name is None and not args:
                return None
            self._names[index] = call.name
            self._args[index] = args
            return ToolCallDelta(index, id=self._new_id(), name=call.name, arguments=args or None)
        name = call.name if self._names[index] is None else None
        if name is not None:
            self._names[index] = name
        sent = self._args[index]
        piece = args[len(sent):] if args.startswith(sent) and len(args) > len(sent) else None
        if piece is not None:
            self._args[index] = args
        if name is None and piece is None:
            return None
        return ToolCallDelta(index, name=name, arguments=piece)
