"""The responses store in one SQLite file (by default the run directory's): shared by every
worker of a deployment, kept across restarts.

Owning thread: each native pool thread owns its own connection (keyed by
``threading.get_native_id``, which gevent leaves unpatched); no connection is shared. Workers
(processes) meet in the file: WAL mode, and a busy timeout for concurrent writers.

Runs on: request pool threads.
"""
from __future__ import annotations

import sqlite3
import threading
import time

SCHEMA = ("CREATE TABLE IF NOT EXISTS responses "
          "(id TEXT PRIMARY KEY, created REAL NOT NULL, record BLOB NOT NULL)")


class SqliteStore:
    """``ResponseStore`` over one SQLite file; eviction by insertion order (rowid) and age."""

    def __init__(self, path: str, max_entries: int, max_age: float) -> None:
        self.path = path
        self.max_entries = max_entries
        self.max_age = max_age
        self._connections: dict[int, sqlite3.Connection] = {}

    def _db(self) -> sqlite3.Connection:
        tid = threading.get_native_id()
        db = self._connections.get(tid)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(SCHEMA)
            db = self._connections.setdefault(tid, db)
        return db

    def put(self, response_id: str, record: bytes) -> None:
        db = self._db()
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("INSERT OR REPLACE INTO responses (id, created, record) VALUES (?, ?, ?)",
                       (response_id, now, record))
            db.execute("DELETE FROM responses WHERE created < ?", (now - self.max_age,))
            # Beyond the size bound the oldest go: every row but the newest max_entries.
            db.execute("DELETE FROM responses WHERE rowid IN (SELECT rowid FROM responses "
                       "ORDER BY rowid DESC LIMIT -1 OFFSET ?)", (self.max_entries,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def get(self, response_id: str) -> bytes | None:
        row = self._db().execute("SELECT created, record FROM responses WHERE id = ?",
                                 (response_id,)).fetchone()
        if row is None or row[0] < time.time() - self.max_age:
            return None
        return bytes(row[1])
