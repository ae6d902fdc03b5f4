"""Reasoning parsers: the interface and registry (``base``) and one module per family.

Runs on: the response-rendering thread.
"""
from text.reasoning.base import (ReasoningParser, ThinkTagParser, get_reasoning_parser,
                                 register_reasoning_parser)

__all__ = ["ReasoningParser", "ThinkTagParser", "get_reasoning_parser",
           "register_reasoning_parser"]
