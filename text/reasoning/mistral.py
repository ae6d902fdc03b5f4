"""``mistral``: Magistral's ``[THINK]…[/THINK]`` thoughts (special tokens, kept in the text).

Observable behaviour of vLLM 0.32's parser, restated: the output starts as content; ``[THINK]``
opens a thought (a repeated one inside it is dropped), ``[/THINK]`` closes it (a stray one in the
content is dropped), and ``[TOOL_CALLS]`` also ends it, staying with the content for the tool
parser. Whitespace at the end of the thought is not reasoning; content that is only whitespace
waits (streamed) until more content, the thought's end or the output's end. Reasoning tokens are
the tokens inside thoughts. A tokenizer without ``[THINK]``/``[/THINK]`` cannot serve it
(vLLM would fall back to ``<think>`` text or no reasoning at all; greenfront refuses at start).

Runs on: the response-rendering thread (one instance per choice).
"""
from __future__ import annotations

from typing import Sequence

from text.parsed import DeltaParts
from text.reasoning.base import ReasoningParser, register_reasoning_parser

START, END, TOOL = "[THINK]", "[/THINK]", "[TOOL_CALLS]"


@register_reasoning_parser("mistral")
class MistralReasoningParser(ReasoningParser):
    required_tokens = (START, END)
    keep_special_tokens = True
    grammar_based = True

    def __init__(self, vocab, chat_template_kwargs=None) -> None:
        super().__init__(vocab, chat_template_kwargs)
        self.ids = {vocab[START]: START, vocab[END]: END}
        if TOOL in vocab:
            self.ids[vocab[TOOL]] = TOOL
        self._thinking = False
        self._held_reasoning = ""  # trailing whitespace of the thought
        self._held_content = ""    # whitespace-only content not shown yet
        self._content_seen = False

    def _pieces(self, text: str) -> list[tuple[str | None, str]]:
        """(marker or None, text) pieces of ``text``."""
        out: list[tuple[str | None, str]] = []
        while text:
            found = [(at, m) for m in (START, END, TOOL) if (at := text.find(m)) != -1]
            if not found:
                out.append((None, text))
                break
            at, marker = min(found)
            if at:
                out.append((None, text[:at]))
            out.append((marker, marker))
            text = text[at + len(marker):]
        return out

    def _run(self, text: str) -> tuple[str, str, bool]:
        """(reasoning, content, whether a thought ended) of ``text`` from the current state."""
        reasoning, content, ended = [], [], False
        for marker, piece in self._pieces(text):
            if marker == START:
                self._thinking = True
            elif marker == END:
                ended = ended or self._thinking
                self._thinking = False
            elif marker == TOOL:
                ended, self._thinking = True, False
                content.append(piece)
            elif self._thinking:
                reasoning.append(piece)
            else:
                content.append(piece)
        return "".join(reasoning), "".join(content), ended

    def extract(self, text: str) -> tuple[str | None, str | None]:
        self._thinking = False
        reasoning, content, _ = self._run(text)
        return reasoning.rstrip() or None, content or None

    def feed(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        reasoning, content, ended = self._run(delta_text)
        if ended:
            self.ended = True
        reasoning = self._held_reasoning + reasoning
        shown = reasoning.rstrip()
        self._held_reasoning = "" if ended else reasoning[len(shown):]
        content = self._held_content + content
        self._held_content = ""
        if not self._content_seen and content:
            if content.strip():
                self._content_seen = True
            elif not ended:
                self._held_content, content = content, ""
        out = DeltaParts(reasoning=shown or None, content=content or None)
        return None if out.empty() else out

    def flush(self) -> DeltaParts | None:
        content, self._held_content = self._held_content, ""
        return DeltaParts(content=content) if content else None

    def prompt_ends_reasoning(self, prompt_ids: Sequence[int]) -> bool:
        for token in reversed(prompt_ids):
            if token in self.ids:
                return self.ids[token] != START
        return False

    def content_ids(self, delta_ids: Sequence[int]) -> list[int]:
        for at, token in enumerate(delta_ids):
            if self.ids.get(token) == END:
                return list(delta_ids[at + 1:])
            if self.ids.get(token) == TOOL:
                return list(delta_ids[at:])
        return []

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        count, thinking = 0, False
        for token in token_ids:
            marker = self.ids.get(token)
            if marker == START:
                thinking = True
            elif marker is not None:
                thinking = False
            elif thinking:
                count += 1
        return count
