"""String-aware scanning of (possibly partial) JSON text, shared by the tool parsers.

``walk`` yields every structural character outside strings with its nesting depth, and every
string with its span, so a parser can find keys, values and closing brackets without being misled
by brackets or quotes inside strings, on text that may stop anywhere.

Runs on: the response-rendering thread (plain functions).
"""
from __future__ import annotations

from typing import Iterator

#: (kind, start, end, depth): kind "string" (end after the closing quote), "open" (a string still
#: unterminated at the end of the text) or one of ``{}[]:,`` (end = start + 1); depth is the nesting depth
#: before the character (a string: the depth it is at).
Token = tuple[str, int, int, int]


def walk(text: str, start: int = 0) -> Iterator[Token]:
    """The structural tokens of ``text`` from ``start`` (whitespace and scalars are skipped)."""
    depth, i, n = 0, start, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n:
                c = text[j]
                if c == "\\":
                    j += 2
                    continue
                if c == '"':
                    break
                j += 1
            end = min(j + 1, n)
            yield ("string" if j < n else "open"), i, end, depth
            i = end
            continue
        if ch in "{[":
            yield ch, i, i + 1, depth
            depth += 1
        elif ch in "}]":
            depth -= 1
            yield ch, i, i + 1, depth
        elif ch in ":,":
            yield ch, i, i + 1, depth
        i += 1


def stable_prefix(json_text: str, string_keys: set[str] | None) -> str:
    """The part of a growing JSON object (re-serialized on each piece) that cannot change any
    more: every member before the last, the last key, and the last value only when it is a
    string whose key may stay a string (``string_keys`` None: any key), without its closing quote.
    """
    last_colon, last_key, pending = -1, None, None
    for kind, begin, end, depth in walk(json_text):
        if depth != 1:
            continue
        if kind == "string":
            pending = json_text[begin + 1:end - 1]
        elif kind == ":":
            last_colon, last_key, pending = begin, pending, None
    if last_colon < 0:
        return ""
    cut = last_colon + 1
    while cut < len(json_text) and json_text[cut] in " \t\r\n":
        cut += 1
    if cut >= len(json_text) or json_text[cut] != '"':
        return json_text[:cut]
    if string_keys is not None and last_key not in string_keys:
        return json_text[:cut]
    kind, _, end, _ = next(walk(json_text, cut))
    return json_text[:end - 1] if kind == "string" else json_text
