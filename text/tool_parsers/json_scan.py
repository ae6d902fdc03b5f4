"""String-aware scanning of (possibly partial) JSON text, shared by the tool parsers.

``walk`` yields every structural character outside strings with its nesting depth, and every
string with its span, so a parser can find keys, values and closing brackets without being misled
by brackets or quotes inside strings, on text that may stop anywhere. ``scan_object_array`` reads
an array of call objects with it (granite's calls, the "required" tool choice's output);
``stable_prefix`` says how much of a growing JSON object may stream.

Runs on: the response-rendering thread (plain functions).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
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


_SCALAR_END = re.compile(r"[\s,\]}]")


@dataclass
class Member:
    """One top-level member's value in an array element: where it starts and ends (``end`` None
    while it is still open), and its kind ("string", "object", "array" or "scalar")."""

    start: int
    end: int | None
    kind: str


@dataclass
class Element:
    """One ``{…}`` element of a JSON array: its span (``end`` None while open) and its members by
    key (a later duplicate key wins)."""

    start: int
    end: int | None = None
    members: dict[str, Member] = field(default_factory=dict)

    def string(self, text: str, key: str) -> str | None:
        """The decoded string value of ``key`` once complete (None: absent, open or no string)."""
        member = self.members.get(key)
        if member is None or member.kind != "string" or member.end is None:
            return None
        try:
            return json.loads(text[member.start:member.end])
        except ValueError:
            return None


def scan_object_array(text: str, start: int = 0, strict: bool = True
                      ) -> tuple[list[Element], int | None]:
    """The elements of the (possibly partial) JSON array opening at the first non-space character
    of ``text[start:]``, and the index after its ``]`` (None while open). Prefix-stable: a scan of
    a longer text tells what a shorter one had revealed. ``strict``: stop at an element that is
    an array (else it is skipped); an object outside the array always stops the scan."""
    elements: list[Element] = []
    current: Element | None = None
    key: str | None = None
    open_value: tuple[str, Member] | None = None  # a container member awaiting its close
    expect_key = True
    for kind, begin, end, depth in walk(text, start):
        if depth <= 0:
            if kind == "]" and depth == 0:
                return elements, end
            if kind in ("{", "}", "]") or depth < 0:
                return elements, None
            continue
        if depth == 1:
            if kind == "{":
                current, key, expect_key = Element(begin), None, True
                elements.append(current)
            elif kind == "}" and current is not None:
                current.end, current = end, None
            elif kind == "[" and strict:
                return elements, None
            continue
        if current is None:
            continue
        if depth == 2 and kind in ("}", "]") and open_value is not None:
            open_value[1].end, open_value = end, None
            continue
        if depth != 2:
            continue
        if kind in ("string", "open"):
            if expect_key:
                key = text[begin + 1:end - 1] if kind == "string" else None
            elif key is not None:
                current.members[key] = Member(begin, end if kind == "string" else None, "string")
                key = None
        elif kind == ":" and key is not None:
            expect_key = False
            _scalar(text, end, current, key)
        elif kind in ("{", "[") and not expect_key and key is not None:
            member = Member(begin, None, "object" if kind == "{" else "array")
            current.members[key] = member
            open_value, key = (key, member), None
        elif kind == ",":
            expect_key, key = True, None
    return elements, None


def _scalar(text: str, after_colon: int, element: Element, key: str) -> None:
    """Record a member whose value is a number, literal or other bare text (walk skips them)."""
    at = after_colon
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    if at >= len(text) or text[at] in '"{[':
        return
    stop = _SCALAR_END.search(text, at)
    element.members[key] = Member(at, stop.start() if stop else None, "scalar")
