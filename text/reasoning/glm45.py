"""``glm45``: GLM-4.5/4.7 thoughts; a ``<tool_call>`` ends the thought; ``thinking`` or
``enable_thinking`` false makes the whole output content (see ``engine_style``).

Runs on: the response-rendering thread.
"""
from __future__ import annotations

from text.reasoning.base import register_reasoning_parser
from text.reasoning.engine_style import EngineThinkParser


@register_reasoning_parser("glm45")
class Glm45ReasoningParser(EngineThinkParser):
    tool_start = "<tool_call>"
