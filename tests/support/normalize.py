"""Byte normalizers: the values that differ between two runs of the same request."""
from __future__ import annotations

import re
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")

#: What varies between runs: response ids, timestamps (and the request ids of /generate).
VARYING = ("id", "request_id", "created")


def normalized(data: bytes, fields: Iterable[str] = VARYING) -> bytes:
    """``data`` with each ``"field":value`` (a string or a number) as ``"field":"*"``."""
    names = "|".join(re.escape(f) for f in fields)
    return re.sub(rb'"(' + names.encode() + rb')":("[^"]*"|\d+)', rb'"\1":"*"', data)


def normalized_text(data: bytes, fields: Iterable[str] = VARYING) -> str:
    return normalized(data, fields).decode()


def first_equal(fetch_ours: Callable[[], T], fetch_theirs: Callable[[], T],
                attempts: int = 3) -> tuple[T, T]:
    """Both answers to the same streamed request, asked again (up to ``attempts`` times) while
    they differ, and the last pair returned for the caller to compare.

    Why: under load either frontend may put two engine outputs that arrived together into one
    chunk (vLLM's output collector merges them as greenfront's stream does), so the chunking of
    a stream, unlike its content, depends on timing; a real difference repeats every time."""
    for _ in range(attempts):
        ours, theirs = fetch_ours(), fetch_theirs()
        if ours == theirs:
            break
    return ours, theirs
