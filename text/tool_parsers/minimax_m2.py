"""``minimax_m2``: MiniMax M2 calls, XML invocations inside a ``<minimax:tool_call>`` block::

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    </invoke>
    </minimax:tool_call>

Observable behaviour of vLLM 0.32, restated: ``<invoke name=`` (the name double-, single- or not
quoted) opens a call, also outside the block; ``</invoke>`` ends it; each
``<parameter name=KEY>VALUE</parameter>`` is one argument (the value verbatim; a parameter left
open ends at the next one, or is an argument only while streaming), typed by the tool's schema;
calls naming no tool of the request are dropped; a stray ``</minimax:tool_call>`` is dropped.

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import json
import re

from text.tool_parsers.markup import (ARG, ARGS, BETWEEN, CONTENT, END, NAME, PREAMBLE, START,
                                      Grammar, MarkupToolParser)
from text.tool_parsers.registry import register_tool_parser

_NAME = r"<\s*parameter\s+name\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^>\s]+))\s*>"
_PARAM = re.compile(_NAME + r"(.*?)(?:<\s*/\s*parameter\s*>|(?=<\s*parameter\s+name\s*=))",
                    re.DOTALL)
_OPEN_PARAM = re.compile(_NAME + r"(.*)$", re.DOTALL)


def _key(match: re.Match) -> str:
    return (match.group(1) or match.group(2) or match.group(3) or "").strip()


def parameters_json(raw: str, partial: bool) -> str:
    """The ``<parameter name=…>`` tags of an invocation as a JSON object of strings."""
    params = {_key(m): m.group(4) for m in _PARAM.finditer(raw) if _key(m)}
    if partial:
        tail = _OPEN_PARAM.search(_PARAM.sub("", raw))
        if tail and _key(tail):
            params[_key(tail)] = tail.group(4)
    return json.dumps(params, ensure_ascii=False)


_INVOKES = ("INVOKE_DQ", "INVOKE_SQ", "INVOKE")
GRAMMAR = Grammar(
    terminals={"TOOL_START": "<minimax:tool_call>", "TOOL_END": "</minimax:tool_call>",
               "PARAM": "<parameter name=", "PARAM_END": "</parameter>",
               "INVOKE_DQ": '<invoke name="', "INVOKE_SQ": "<invoke name='",
               "INVOKE": "<invoke name=", "INVOKE_END": "</invoke>", "NAME_END_DQ": '">',
               "NAME_END_SQ": "'>", "NAME_END": ">"},
    transitions={
        (CONTENT, "TOOL_START"): (PREAMBLE, ()),
        (ARGS, "PARAM"): (ARGS, (ARG,)),
        (ARGS, "PARAM_END"): (ARGS, (ARG,)),
        (PREAMBLE, "TOOL_END"): (CONTENT, ()),
        (BETWEEN, "TOOL_END"): (CONTENT, ()),
        (CONTENT, "TOOL_END"): (CONTENT, ()),
        (ARGS, "INVOKE_END"): (BETWEEN, (END,)),
        **{(state, invoke): (NAME, (START,))
           for state in (CONTENT, PREAMBLE, BETWEEN) for invoke in _INVOKES},
        **{(NAME, end): (ARGS, ()) for end in ("NAME_END_DQ", "NAME_END_SQ", "NAME_END")},
    },
    converter=parameters_json,
    validate_names=True,
)


@register_tool_parser("minimax_m2")
class MinimaxM2ToolParser(MarkupToolParser):
    grammar = GRAMMAR
