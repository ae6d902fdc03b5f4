"""``granite``: Granite 3.2's thoughts in plain words: ``Here is my thought process: … Here is my
response: …`` (or ``Here's``).

Observable behaviour of vLLM 0.32's parser, restated:
- whole output: the first "thought process: … response:" pair anywhere in the text splits it
  (the text before the pair is dropped; the content is None when empty); without both phrases
  the whole output is content.
- streaming: only an output that *starts* with the thought phrase has reasoning; while the
  output may still become that phrase nothing is shown, and once it cannot, everything so far is
  content. In the thought, text that may be the start of the response phrase is held back; after
  the phrase everything is content. The thought never "ends" for vLLM's serving layer, so a
  streamed answer is never given to a tool parser, and no token counts as reasoning.

Runs on: the response-rendering thread (one instance per choice).
"""
from __future__ import annotations

import re
from typing import Sequence

from text.parsed import DeltaParts, tag_overlap
from text.reasoning.base import ReasoningParser, register_reasoning_parser

THOUGHT = ("Here's my thought process:", "Here is my thought process:")
RESPONSE = ("Here's my response:", "Here is my response:")
_WHOLE = re.compile(r"(?:Here's|Here is) my thought process:(.*?)(?:Here's|Here is) my "
                    r"response:(.*)", re.DOTALL)


@register_reasoning_parser("granite")
class GraniteReasoningParser(ReasoningParser):
    def __init__(self, vocab, chat_template_kwargs=None) -> None:
        super().__init__(vocab, chat_template_kwargs)
        self.text = ""
        self._mode = "start"   # "start": may still open a thought; "thought"; "content"
        self._sent = 0         # characters of the thought (or content) already shown

    def extract(self, text: str) -> tuple[str | None, str | None]:
        match = _WHOLE.search(text)
        if match is None:
            return None, text
        return match.group(1), match.group(2) or None

    def feed(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        self.text += delta_text
        if self._mode == "start":
            opened = next((p for p in THOUGHT if self.text.startswith(p)), None)
            if opened is None:
                if any(p.startswith(self.text) for p in THOUGHT):
                    return None
                self._mode = "content"
                return DeltaParts(content=self.text)
            self._mode, self._sent = "thought", len(opened)
        if self._mode == "content":
            return DeltaParts(content=delta_text) if delta_text else None
        return self._thought()

    def _thought(self) -> DeltaParts | None:
        text = self.text
        ends = [(at, len(p)) for p in RESPONSE if (at := text.find(p, self._sent)) != -1]
        if ends:
            at, size = min(ends)
            reasoning, content = text[self._sent:at], text[at + size:]
            self._mode = "content"
            out = DeltaParts(reasoning=reasoning or None, content=content or None)
            return None if out.empty() else out
        limit = len(text) - max(tag_overlap(text, p) for p in RESPONSE)
        if limit <= self._sent:
            return None
        piece, self._sent = text[self._sent:limit], limit
        return DeltaParts(reasoning=piece)
