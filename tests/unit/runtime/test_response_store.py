"""The SQLite responses store: shared by connections (as by workers), bounded by size (the
oldest go first) and by age."""
from __future__ import annotations

import time

from runtime.response_store.sqlite_store import SqliteStore


def test_put_get_shared_between_stores(tmp_path):
    path = str(tmp_path / "r.sqlite3")
    a, b = SqliteStore(path, 10, 60.0), SqliteStore(path, 10, 60.0)
    a.put("resp_1", b'{"x": 1}')
    assert b.get("resp_1") == b'{"x": 1}'
    assert b.get("resp_2") is None
    b.put("resp_1", b'{"x": 2}')
    assert a.get("resp_1") == b'{"x": 2}'


def test_size_bound_evicts_the_oldest(tmp_path):
    store = SqliteStore(str(tmp_path / "r.sqlite3"), 3, 60.0)
    for i in range(5):
        store.put(f"resp_{i}", b"{}")
    assert [store.get(f"resp_{i}") is not None for i in range(5)] == [False, False, True, True,
                                                                      True]


def test_age_bound(tmp_path):
    store = SqliteStore(str(tmp_path / "r.sqlite3"), 3, 0.05)
    store.put("resp_old", b"{}")
    time.sleep(0.1)
    assert store.get("resp_old") is None
    store.put("resp_new", b"{}")  # evicts what is past the age bound
    assert store._db().execute("SELECT id FROM responses").fetchall() == [("resp_new",)]
