"""``deepseek_v3`` and ``deepseek_v31``: DeepSeek's calls between marker tokens::

    V3:   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
          ```json
          {"city": "Paris"}
          ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
    V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>…

Observable behaviour of vLLM 0.32's parsers (line-based, token-id driven), restated:
- whole output: without ``<｜tool▁calls▁begin｜>`` it is content. Otherwise every complete call
  whose parts each fit on one line is a call (V3: type, name, the arguments line between the
  fences; V3.1: name and the arguments up to the call's end); the content is the text before the
  section (None when empty).
- streaming, by the marker *ids* seen so far: before the section everything is content; the
  section markers' text is dropped; between calls the text is content again; inside a call the
  name is announced once its line is complete (V3) or ``<｜tool▁sep｜>`` came (V3.1), then the
  arguments (the rest of that line, V3: up to its last character that is no newline or
  backtick) stream as they grow. A call's first delta carries nothing when it is the marker
  alone; the delta that closes a call sends nothing unless its text holds ``"}``.

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import re
from typing import ClassVar, Sequence

from text.parsed import DeltaParts, ExtractedToolCalls, ToolCall, ToolCallDelta
from text.tool_parsers.base import ToolParser
from text.tool_parsers.ids import new_call_id
from text.tool_parsers.registry import register_tool_parser

SECTION, SECTION_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"


@register_tool_parser("deepseek_v3")
class DeepSeekV3ToolParser(ToolParser):
    required_tokens = (SECTION, SECTION_END)
    #: a whole call (name, arguments), a streamed call's part (name, arguments so far), and
    #: the part once only its name is known; none crosses a line (no DOTALL).
    whole: ClassVar[re.Pattern] = re.compile(
        CALL + r"(?:.*)" + SEP + r"(.*)\n```json\n(.*)\n```" + CALL_END)
    partial: ClassVar[re.Pattern] = re.compile(r"(?:.*)" + SEP + r"(.*)\n```json\n(.*[^\n`])")
    name_only: ClassVar[re.Pattern | None] = re.compile(r"(?:.*)" + SEP + r"(.*)\n")

    def __init__(self, vocab, tools=None) -> None:
        super().__init__(vocab, tools)
        self.ids = {m: vocab.get(m) for m in (SECTION, CALL, CALL_END)}
        self._counts = {CALL: 0, CALL_END: 0}
        self._in_section = False
        self._index = -1
        self._named = False
        self._last: list[dict[str, str]] = []  # per call: the name and arguments last parsed

    def extract(self, text: str) -> ExtractedToolCalls:
        if SECTION not in text:
            return ExtractedToolCalls([], text)
        calls = [ToolCall(name, args) for name, args in self.whole.findall(text)]
        return ExtractedToolCalls(calls, text[:text.find(SECTION)] or None, tools_called=True)

    def _stream(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        before = dict(self._counts)
        for token in delta_ids:
            if token == self.ids[SECTION]:
                self._in_section = True
            for marker in (CALL, CALL_END):
                if token == self.ids[marker]:
                    self._counts[marker] += 1
        if not self._in_section:
            return DeltaParts(content=delta_text)
        text = delta_text.replace(SECTION, "").replace(SECTION_END, "")
        starts, ends = self._counts[CALL], self._counts[CALL_END]
        if starts == ends and before[CALL_END] == ends and CALL_END not in text:
            return DeltaParts(content=text)
        part = rest = None
        if CALL_END in text:
            # the part of the call being closed (vLLM looks at the text once more)
            part = (self.text + text).split(CALL)[-1].split(CALL_END)[0].rstrip()
            text = text.split(CALL_END)[0].rstrip()
            rest = text.lstrip()
        if starts > ends and starts > before[CALL]:
            part = self.text.split(CALL)[-1] if len(delta_ids) > 1 else None
            rest = None
            self._index += 1
            self._named = False
            self._open_call(self._index)
        elif starts > ends:
            part, rest = self.text.split(CALL)[-1], None
        elif starts == ends and ends >= before[CALL_END]:
            if not 0 <= self._index < len(self._last):
                return None  # closed before anything was parsed (or opened in this delta)
            if self._last[self._index].get("arguments"):
                if '"}' not in text:
                    return None
                piece = text[:text.rindex('"}')] + '"}'
                self.streamed_args[self._index] += piece
                return DeltaParts(tool_calls=[ToolCallDelta(self._index, arguments=piece)])
        else:
            return DeltaParts(content=text.replace(CALL, "").replace(CALL_END, ""))
        return self._call_delta(part, rest, text)

    def _parsed(self, part: str | None) -> dict[str, str] | None:
        if not part:
            return {}
        if (match := self.partial.match(part)) is not None:
            return {"name": match.group(1), "arguments": match.group(2)}
        if self.name_only is not None and (match := self.name_only.match(part)) is not None:
            return {"name": match.group(1), "arguments": ""}
        return None

    def _call_delta(self, part: str | None, rest: str | None, text: str) -> DeltaParts | None:
        now = self._parsed(part)
        if now is None:
            return None
        if not self._named:
            if not now.get("name"):
                return None
            self._named = True
            return DeltaParts(tool_calls=[ToolCallDelta(self._index, id=new_call_id(),
                                                        name=now["name"])])
        if part is None:
            return DeltaParts(content=text) if rest is not None else None
        while len(self._last) <= self._index:
            self._last.append({})
        before, after = self._last[self._index].get("arguments"), now.get("arguments")
        self._last[self._index] = now
        if not after or (before and not (len(after) > len(before) and after.startswith(before))):
            return None
        piece = after[len(before):] if before else after
        self.streamed_args[self._index] = after
        return DeltaParts(tool_calls=[ToolCallDelta(self._index, arguments=piece)])


@register_tool_parser("deepseek_v31")
class DeepSeekV31ToolParser(DeepSeekV3ToolParser):
    whole = re.compile(CALL + r"(.*?)" + SEP + r"(.*?)" + CALL_END)
    partial = re.compile(r"(.*)" + SEP + r"(.*)")
    name_only = None  # the partial form matches as soon as the separator came
