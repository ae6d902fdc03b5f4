"""``kimi_k2``: Kimi K2 thoughts; ``<|tool_calls_section_begin|>`` ends the thought;
``thinking`` or ``enable_thinking`` false makes the whole output content (see ``engine_style``).

Runs on: the response-rendering thread.
"""
from __future__ import annotations

from text.reasoning.base import register_reasoning_parser
from text.reasoning.engine_style import EngineThinkParser


@register_reasoning_parser("kimi_k2")
class KimiK2ReasoningParser(EngineThinkParser):
    tool_start = "<|tool_calls_section_begin|>"
