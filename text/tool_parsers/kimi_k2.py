"""``kimi_k2``: Kimi K2 calls, JSON arguments after a header that is the model's own call id::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

Observable behaviour of vLLM 0.32, restated: calls live inside the section (text there outside a
call is dropped); the header (stripped) must read ``NAME:N`` (``functions.`` dropped from the name)
and becomes the call's id; the arguments are the raw text up to ``<|tool_call_end|>`` (the
section's end also ends a call), streamed as they come, stripped when the output is whole (``{}``
when empty). A finished output's content is not stripped around calls (whitespace-only content
is dropped).

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import re

from text.tool_parsers.markup import (ARGS, BETWEEN, CONTENT, END, NAME, PREAMBLE, START,
                                      Grammar, MarkupToolParser, _Slot)
from text.tool_parsers.registry import register_tool_parser

_HEADER = re.compile(r"(.+:\d+)")

GRAMMAR = Grammar(
    terminals={"SECTION": "<|tool_calls_section_begin|>",
               "SECTION_END": "<|tool_calls_section_end|>", "CALL": "<|tool_call_begin|>",
               "CALL_END": "<|tool_call_end|>", "ARGS": "<|tool_call_argument_begin|>"},
    transitions={
        (CONTENT, "SECTION"): (PREAMBLE, ()),
        (PREAMBLE, "CALL"): (NAME, (START,)),
        (NAME, "ARGS"): (ARGS, ()),
        (ARGS, "CALL_END"): (BETWEEN, (END,)),
        (ARGS, "SECTION_END"): (PREAMBLE, (END,)),
        (BETWEEN, "CALL"): (NAME, (START,)),
        (PREAMBLE, "SECTION_END"): (PREAMBLE, ()),
        (BETWEEN, "SECTION_END"): (PREAMBLE, ()),
    },
    strip_content=False,
)


@register_tool_parser("kimi_k2")
class KimiK2ToolParser(MarkupToolParser):
    grammar = GRAMMAR
    required_tokens = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>")

    def _call_name(self, slot: _Slot, raw: str) -> str | None:
        match = _HEADER.match(raw.strip())
        if match is None:
            slot.name = ""
            return None
        slot.own_id = match.group(1).strip()
        name = slot.own_id.split(":")[0]
        return name[len("functions."):] if name.startswith("functions.") else name

    def _first_piece_is_args(self) -> bool:
        return True

    def _fallback_args(self, raw: str) -> str:
        return raw.strip() or "{}"
