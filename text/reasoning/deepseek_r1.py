"""``deepseek_r1``: ``<think>…</think>`` thoughts (the opening tag is often in the prompt).

Runs on: the response-rendering thread.
"""
from __future__ import annotations

from text.reasoning.base import ThinkTagParser, register_reasoning_parser


@register_reasoning_parser("deepseek_r1")
class DeepSeekR1ReasoningParser(ThinkTagParser):
    pass
