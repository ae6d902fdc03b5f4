"""``qwen3``: Qwen3's ``<think>…</think>``, where a ``<tool_call>`` also ends the thought.

Observable behaviour of vLLM 0.32's (grammar-engine) parser, restated: without
``enable_thinking: false`` the output starts inside the thought (an opening ``<think>`` is
dropped); ``</think>`` ends it, and so does ``<tool_call>``, which stays with the content for the
tool parser. A finished output loses any further ``</think>``; streaming passes text after the
thought through unchanged. Every token of the thought except the markers is a reasoning token.

Runs on: the response-rendering thread.
"""
from __future__ import annotations

from typing import Sequence

from text.parsed import DeltaParts
from text.reasoning.base import ThinkTagParser, register_reasoning_parser

TOOL_START = "<tool_call>"


@register_reasoning_parser("qwen3")
class Qwen3ReasoningParser(ThinkTagParser):
    grammar_based = True

    def __init__(self, vocab, chat_template_kwargs=None) -> None:
        super().__init__(vocab, chat_template_kwargs)
        self.thinking = self.chat_template_kwargs.get("enable_thinking", True) is not False
        self.tool_id = vocab.get(TOOL_START)
        if not self.thinking:
            self.ended = True

    def prompt_ends_reasoning(self, prompt_ids: Sequence[int]) -> bool:
        return not self.thinking or super().prompt_ends_reasoning(prompt_ids)

    def _end(self, text: str) -> tuple[int, int] | None:
        """(where the thought's text stops, where the content starts) in ``text``."""
        ends = []
        if (at := text.find(self.end_token)) != -1:
            ends.append((at, at + len(self.end_token)))
        if (at := text.find(TOOL_START)) != -1:
            ends.append((at, at))
        return min(ends) if ends else None

    def extract(self, text: str) -> tuple[str | None, str | None]:
        if not self.thinking:
            return None, text
        if text.startswith(self.start_token):
            text = text[len(self.start_token):]
        end = self._end(text)
        if end is None:
            return text, None
        content = text[end[1]:].replace(self.end_token, "")
        return text[:end[0]] or None, content or None

    def feed(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        text = delta_text
        if self.start_id in delta_ids:
            at = text.find(self.start_token)
            text = text[:at] + text[at + len(self.start_token):]
        if self.end_id not in delta_ids and (self.tool_id is None or self.tool_id not in delta_ids):
            return DeltaParts(reasoning=text) if text else None
        self.ended = True
        end = self._end(text)
        if end is None:  # the marker was dropped from the text (skip_special_tokens)
            return DeltaParts(reasoning=text) if text else None
        reasoning, content = text[:end[0]], text[end[1]:]
        if not reasoning and not content:
            return None
        return DeltaParts(reasoning=reasoning or None, content=content or None)

    def content_ids(self, delta_ids: Sequence[int]) -> list[int]:
        for at, token in enumerate(delta_ids):
            if token == self.end_id:
                return list(delta_ids[at + 1:])
            if token == self.tool_id and self.tool_id is not None:
                return list(delta_ids[at:])  # the tool marker stays with the content
        return []

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        if not self.thinking:
            return 0
        count = 0
        for token in token_ids:
            if token == self.end_id or token == self.tool_id:
                break
            if token != self.start_id:
                count += 1
        return count
