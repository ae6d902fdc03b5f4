"""Bounded memo tables, one per native thread, for pure results that every request of a kind
recomputes: an agent sends the same tools with every turn, and every chat prompt ends in the
same generation-prompt tokens.

Why per thread: the tables then need no lock, and none is shared. ``threading.local`` would not
do, because gevent's monkey-patching makes it greenlet-local (a fresh table per request in the
HTTP hub); ``threading.get_native_id`` is left unpatched.

Runs on: any thread; each table is owned by the native thread whose id keys it.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Hashable, TypeVar

V = TypeVar("V")

#: Entries per thread before a table starts over (the results here are a few hundred bytes).
DEFAULT_LIMIT = 256


class ThreadMemo:
    """``get_or_make(key, make)`` with one table per native thread.

    Owns: ``_tables``, native thread id -> that thread's table. The outer dict only ever gains an
    entry per thread (``dict.setdefault``, one atomic call under the GIL); a table is read and
    written by its own thread only. A reused thread id inherits a table of pure results, which
    stay valid.
    """

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._limit = limit
        self._tables: dict[int, dict[Hashable, Any]] = {}

    def _table(self) -> dict[Hashable, Any]:
        tid = threading.get_native_id()
        table = self._tables.get(tid)
        if table is None:
            table = self._tables.setdefault(tid, {})
        return table

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        """The memoized value of ``key`` on this thread, made by ``make()`` on a miss (a
        raising ``make`` stores nothing). Full tables start over rather than track use."""
        table = self._table()
        try:
            return table[key]
        except KeyError:
            pass
        value = make()
        if len(table) >= self._limit:
            table.clear()
        table[key] = value
        return value
