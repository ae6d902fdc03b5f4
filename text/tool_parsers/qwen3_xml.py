"""``qwen3_xml`` and ``qwen3_coder``: Qwen3-Coder's XML calls (one format, two names, as in vLLM)::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </tool_call>

Observable behaviour of vLLM 0.32, restated: the name runs from ``<function=`` to ``>``; each
``<parameter=KEY>VALUE</parameter>`` is one argument (a parameter left open ends at the next
``<parameter=``, or the output), its value losing one leading and one trailing newline; values
are typed by the tool's schema; ``<function=`` without ``<tool_call>`` also opens a call, and a
new ``<tool_call>``/``<function=`` after ``</function>`` opens the next one. Text between
``<tool_call>`` and ``<function=`` is dropped.

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import json
import re

from text.tool_parsers.markup import (ARG, ARGS, BETWEEN, CONTENT, END, NAME, PREAMBLE, START,
                                      Grammar, MarkupToolParser)
from text.tool_parsers.registry import register_tool_parser

_PARAM = re.compile(r"<\s*parameter\s*=\s*([^>]*)>(.*?)(?:<\s*/\s*parameter\s*>|"
                    r"(?=<\s*parameter\s*=))", re.DOTALL)
_OPEN_PARAM = re.compile(r"<\s*parameter\s*=\s*([^>]+)>(.*)$", re.DOTALL)


def _unwrap(value: str) -> str:
    """Drop the template's newline after the opening and before the closing tag."""
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def parameters_json(raw: str, partial: bool) -> str:
    """The ``<parameter=…>`` tags of a call's body as a JSON object of strings."""
    params = {m.group(1): _unwrap(m.group(2)) for m in _PARAM.finditer(raw)}
    if partial:
        tail = _OPEN_PARAM.search(_PARAM.sub("", raw))
        if tail and tail.group(1):
            params[tail.group(1)] = _unwrap(tail.group(2))
    return json.dumps(params, ensure_ascii=False)


GRAMMAR = Grammar(
    terminals={"TOOL_START": "<tool_call>", "TOOL_END": "</tool_call>",
               "FUNC": "<function=", "FUNC_END": "</function>", "PARAM": "<parameter=",
               "PARAM_END": "</parameter>", "CLOSE": ">"},
    transitions={
        (CONTENT, "TOOL_START"): (PREAMBLE, (START,)),
        (CONTENT, "FUNC"): (NAME, (START,)),
        (PREAMBLE, "TOOL_END"): (CONTENT, (END,)),
        (PREAMBLE, "FUNC"): (NAME, ()),
        (NAME, "CLOSE"): (ARGS, ()),
        (NAME, "FUNC_END"): (BETWEEN, (END,)),
        (ARGS, "FUNC_END"): (BETWEEN, (END,)),
        (ARGS, "PARAM"): (ARGS, (ARG,)),
        (ARGS, "PARAM_END"): (ARGS, (ARG,)),
        (BETWEEN, "TOOL_END"): (CONTENT, ()),
        (BETWEEN, "TOOL_START"): (PREAMBLE, (START,)),
        (BETWEEN, "FUNC"): (NAME, (START,)),
    },
    converter=parameters_json,
)


@register_tool_parser("qwen3_xml")
class Qwen3XmlToolParser(MarkupToolParser):
    grammar = GRAMMAR


@register_tool_parser("qwen3_coder")
class Qwen3CoderToolParser(Qwen3XmlToolParser):
    pass
