"""The thought format of vLLM 0.32's grammar-engine families (glm45, kimi_k2, minimax_m2), on
the ``qwen3`` parser: ``<think>…</think>`` where the output starts inside the thought, and the
family's own tool-call marker also ends it (the marker stays with the content).

What differs from ``qwen3``, as vLLM 0.32 answers (restated from its outputs for given texts):
the family's tool marker instead of ``<tool_call>``; an opening ``<think>`` anywhere inside the
thought is dropped, not only a leading one; whitespace at the end of the thought is not
reasoning (streamed, whitespace is held back until more text follows, and dropped when the
thought ends); and which chat template kwargs switch thinking off (``thinking_switch``).

Runs on: the response-rendering thread (one instance per choice).
"""
from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

from text.parsed import DeltaParts
from text.reasoning.qwen3 import Qwen3ReasoningParser


def thinking_from_kwargs(kwargs: Mapping[str, Any]) -> bool:
    """GLM and Kimi: on unless ``thinking`` or ``enable_thinking`` is given, then on when either
    given one is truthy."""
    thinking, enable = kwargs.get("thinking"), kwargs.get("enable_thinking")
    if thinking is None and enable is None:
        return True
    return bool(thinking) or bool(enable)


class EngineThinkParser(Qwen3ReasoningParser):
    """Base of the families above; subclasses set ``tool_start`` and ``thinking_switch``."""

    tool_start: ClassVar[str] = "<tool_call>"
    #: whether the chat template kwargs can turn thinking off (MiniMax M2 always thinks)
    thinking_switch: ClassVar[bool] = True

    def __init__(self, vocab, chat_template_kwargs=None) -> None:
        super().__init__(vocab, chat_template_kwargs)
        self.tool_id = vocab.get(self.tool_start)
        self.thinking = (thinking_from_kwargs(self.chat_template_kwargs)
                         if self.thinking_switch else True)
        self.ended = not self.thinking
        self._held = ""  # trailing whitespace of the thought, not yet shown

    def _end(self, text: str) -> tuple[int, int] | None:
        ends = []
        if (at := text.find(self.end_token)) != -1:
            ends.append((at, at + len(self.end_token)))
        if (at := text.find(self.tool_start)) != -1:
            ends.append((at, at))
        return min(ends) if ends else None

    def extract(self, text: str) -> tuple[str | None, str | None]:
        if not self.thinking:
            return None, text
        end = self._end(text)
        thought = text if end is None else text[:end[0]]
        reasoning = thought.replace(self.start_token, "").rstrip()
        if end is None:
            return reasoning or None, None
        content = text[end[1]:].replace(self.end_token, "")
        return reasoning or None, content or None

    def feed(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        # An opening marker anywhere in the thought is dropped (ids and text alike).
        parts = super().feed(delta_text.replace(self.start_token, ""),
                             [t for t in delta_ids if t != self.start_id])
        if parts is None or parts.reasoning is None:
            if self.ended:
                self._held = ""
            return parts
        text = self._held + parts.reasoning
        shown = text.rstrip()
        self._held = "" if self.ended else text[len(shown):]
        parts.reasoning = shown or None
        return None if parts.empty() else parts

    def prompt_ends_reasoning(self, prompt_ids: Sequence[int]) -> bool:
        if not self.thinking:
            return True
        for token in reversed(prompt_ids):
            if token == self.end_id or token == self.tool_id:
                return True
            if token == self.start_id:
                return False
        return False
