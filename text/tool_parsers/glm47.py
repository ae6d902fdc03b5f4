"""``glm45`` and ``glm47``: GLM-4.5/4.7 calls (one format, two names, as in vLLM 0.32)::

    <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>

Observable behaviour of vLLM 0.32, restated: the name is the text after ``<tool_call>`` up to the
first ``<arg_key>`` (or ``</tool_call>``), stripped; each key/value pair is one argument (the key
stripped, the value verbatim; a value left open is an argument only while streaming), typed by
the tool's schema; a call whose name is not one of the request's tools is dropped. vLLM never
constrains ``required``/named choices for this family: they are parsed from its own format.

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import json
import re

from text.tool_parsers.markup import (ARG, ARGS, CONTENT, END, NAME, START, Grammar,
                                      MarkupToolParser, _Slot)
from text.tool_parsers.registry import register_tool_parser

_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
_OPEN_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*)$", re.DOTALL)


def pairs_json(raw: str, partial: bool) -> str:
    """The ``<arg_key>``/``<arg_value>`` pairs of a call's body as a JSON object of strings."""
    params = {m.group(1).strip(): m.group(2) for m in _PAIR.finditer(raw)}
    if partial:
        tail = _OPEN_PAIR.search(_PAIR.sub("", raw))
        if tail and tail.group(1).strip():
            params[tail.group(1).strip()] = tail.group(2)
    return json.dumps(params, ensure_ascii=False)


GRAMMAR = Grammar(
    terminals={"TOOL_START": "<tool_call>", "TOOL_END": "</tool_call>", "KEY": "<arg_key>",
               "KEY_END": "</arg_key>", "VALUE": "<arg_value>", "VALUE_END": "</arg_value>"},
    transitions={
        (CONTENT, "TOOL_START"): (NAME, (START,)),
        (NAME, "KEY"): (ARGS, (ARG,)),
        (NAME, "TOOL_END"): (CONTENT, (END,)),
        (ARGS, "TOOL_END"): (CONTENT, (END,)),
        **{(ARGS, tag): (ARGS, (ARG,)) for tag in ("KEY", "KEY_END", "VALUE", "VALUE_END")},
    },
    converter=pairs_json,
    validate_names=True,
)


@register_tool_parser("glm47")
class Glm47ToolParser(MarkupToolParser):
    grammar = GRAMMAR
    supports_required_and_named = False

    def _call_name(self, slot: _Slot, raw: str) -> str | None:
        return raw.strip() or None


@register_tool_parser("glm45")
class Glm45ToolParser(Glm47ToolParser):
    pass
