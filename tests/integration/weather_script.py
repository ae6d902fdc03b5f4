"""The scripted weather conversation the tool-calling suites share (chat, Responses, Messages):
the marker-token model with ``hermes`` tools and ``qwen3`` reasoning, the simulator scripted by
text (each API declares the ``get_weather`` tool in its own shape)."""
from __future__ import annotations

CALL_TEXT = ('<think>The user wants the weather.</think>'
             '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>')
ANSWER_TEXT = "<think>The tool said sunny.</think>It is sunny in Paris."
PARSER_ENV = {"GREENFRONT_ENABLE_AUTO_TOOL_CHOICE": "1", "GREENFRONT_TOOL_CALL_PARSER": "hermes",
              "GREENFRONT_REASONING_PARSER": "qwen3"}
