"""A JSON text read as far as it goes: the calls of Mistral's pre-v11 ``[{"name": …,
"arguments": …}, …]`` form, from a prefix that may stop anywhere.

vLLM 0.32 streams this form through an event parser (``ijson``) fed as the text arrives; what
a client accumulates is a pure function of the text so far: each call's name once its string is
complete, its arguments as the raw text of the ``arguments`` object from its ``{`` (to its
matching ``}`` once closed; the whole rest while open), or the decoded string when
``arguments`` is a string, and once the top-level array (or a bare top-level object) closes,
the text after it as content. This module computes that; ``mistral_pre_v11`` turns it into
deltas. Scanning stops at the first token not complete yet or not JSON (vLLM's event parser
gives nothing more after an error either).

Runs on: the response-rendering thread (pure functions).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

_LITERAL = re.compile(r"-?[0-9][0-9.eE+-]*|true|false|null")
_DECODER = json.JSONDecoder()


@dataclass(slots=True)
class CallSoFar:
    """One call object of the array as far as it has been read."""

    name: str | None = None
    args_start: int | None = None   # offset of the arguments object's "{"
    args_end: int | None = None     # offset just past its "}", once closed
    args_string: str | None = None  # arguments given as a JSON string


@dataclass(slots=True)
class CallsSoFar:
    calls: list[CallSoFar]
    end: int | None  # offset just past the top-level value once it closed


def _token(text: str, i: int) -> tuple[str, object, int] | None:
    """(kind, value, end) of the complete token at ``i`` (whitespace skipped by the caller)."""
    c = text[i]
    if c in "{}[]:,":
        return c, None, i + 1
    if c == '"':
        try:
            value, end = _DECODER.raw_decode(text, i)
        except ValueError:
            return None  # unfinished (or broken) string
        return "str", value, end
    m = _LITERAL.match(text, i)
    if m is None or m.end() == len(text):
        return None  # not JSON, or a number/literal that may still grow
    return "lit", None, m.end()


def scan_calls(text: str) -> CallsSoFar:
    """The calls in ``text`` (what follows the ``[TOOL_CALLS]`` marker) read so far."""
    calls: list[CallSoFar] = []
    # stack of [kind "{"/"[", key of the value being read (objects), the call it is, or None]
    stack: list[list] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        token = _token(text, i)
        if token is None:
            break
        kind, value, end = token
        if kind in "{[":
            parent = stack[-1] if stack else None
            call = None
            if kind == "{" and (parent is None or (parent[0] == "[" and len(stack) == 1)):
                call = CallSoFar()
                calls.append(call)
            elif kind == "{" and parent is not None and parent[2] is not None \
                    and parent[1] == "arguments" and len(stack) <= 2:
                parent[2].args_start = i
            stack.append([kind, None, call, i])
        elif kind in "}]":
            if not stack:
                break
            closed = stack.pop()
            if stack and stack[-1][2] is not None and stack[-1][1] == "arguments" \
                    and stack[-1][2].args_start == closed[3]:
                stack[-1][2].args_end = end
            if not stack:
                return CallsSoFar(calls, end)
        elif kind == "str" and stack and stack[-1][0] == "{" and stack[-1][1] is None:
            stack[-1][1] = value  # a key; its ":" follows
        elif kind == ",":
            if stack and stack[-1][0] == "{":
                stack[-1][1] = None
        elif kind == "str" and stack and stack[-1][2] is not None:
            if stack[-1][1] == "name":
                stack[-1][2].name = value
            elif stack[-1][1] == "arguments":
                stack[-1][2].args_string = value
        i = end
    return CallsSoFar(calls, None)
