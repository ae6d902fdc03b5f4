"""Tool-call parsers: the interface (``base``), the registry and plugin loader (``registry``),
and one module per output format (hermes, llama_json, mistral, pythonic, granite, …).

Runs on: the response-rendering thread (parsers are plain code over text deltas).
"""
from text.parsed import DeltaParts, ExtractedToolCalls, ToolCall, ToolCallDelta
from text.tool_parsers.base import MissingMarkerTokens, ToolParser
from text.tool_parsers.registry import get_tool_parser, load_plugin, names, register_tool_parser

__all__ = ["DeltaParts", "ExtractedToolCalls", "MissingMarkerTokens", "ToolCall",
           "ToolCallDelta", "ToolParser", "get_tool_parser", "load_plugin", "names",
           "register_tool_parser"]
