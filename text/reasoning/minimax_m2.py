"""``minimax_m2``: MiniMax M2 thoughts (the model never writes the opening tag, its prompt
does); ``<minimax:tool_call>`` ends the thought; thinking cannot be switched off (see
``engine_style``).

Runs on: the response-rendering thread.
"""
from __future__ import annotations

from text.reasoning.base import register_reasoning_parser
from text.reasoning.engine_style import EngineThinkParser


@register_reasoning_parser("minimax_m2")
class MinimaxM2ReasoningParser(EngineThinkParser):
    tool_start = "<minimax:tool_call>"
    thinking_switch = False
