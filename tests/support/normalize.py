"""Byte normalizers: the values that differ between two runs of the same request."""
from __future__ import annotations

import re
from typing import Iterable

#: What varies between runs: response ids, timestamps (and the request ids of /generate).
VARYING = ("id", "request_id", "created")


def normalized(data: bytes, fields: Iterable[str] = VARYING) -> bytes:
    """``data`` with each ``"field":value`` (a string or a number) as ``"field":"*"``."""
    names = "|".join(re.escape(f) for f in fields)
    return re.sub(rb'"(' + names.encode() + rb')":("[^"]*"|\d+)', rb'"\1":"*"', data)


def normalized_text(data: bytes, fields: Iterable[str] = VARYING) -> str:
    return normalized(data, fields).decode()
