"""The /v1/responses store: stored responses that every worker of a deployment shares
(``docs/responses.md`` §3).

vLLM keeps stored responses in one process's memory, never evicted; behind several gunicorn
workers a follow-up turn on another worker would not find its predecessor. greenfront keeps them
outside the workers: SQLite in the run directory by default (every worker of one deployment, and
the same deployment after a restart), Redis for deployments on several hosts
(``GREENFRONT_RESPONSES_STORE_URL=redis://…``); both bounded in size and age, evicting the oldest.

A record is the response object plus the chat messages its request rendered (what a later
``previous_response_id`` replays), stored as one JSON document.

Runs on: request pool threads only (the stores' connections are per native thread; the HTTP hub
hands writes to the pool).
"""
from __future__ import annotations

import os
from typing import Protocol

from base.config import Config

SQLITE_FILE = "responses.sqlite3"


class ResponseStore(Protocol):
    """Stored responses by id, bounded in size and age. Every method runs on a pool thread."""

    def put(self, response_id: str, record: bytes) -> None:
        """Store (or replace) a record, evicting the oldest beyond the bounds."""

    def get(self, response_id: str) -> bytes | None:
        """The record, or None when unknown, evicted or older than the age bound."""


_stores: dict[tuple, ResponseStore] = {}


def store_for(config: Config) -> ResponseStore | None:
    """This process's store for ``config`` (None when the store is off), made on first use."""
    if not config.enable_responses_store:
        return None
    key = (os.getpid(), config.responses_store_url, config.run_dir)
    store = _stores.get(key)
    if store is None:
        store = _stores.setdefault(key, _open(config))
    return store


def _open(config: Config) -> ResponseStore:
    url = config.responses_store_url
    bounds = (config.responses_store_max_entries, config.responses_store_max_age)
    if url.startswith(("redis://", "rediss://", "unix://")):
        from runtime.response_store.redis_store import RedisStore
        return RedisStore(url, *bounds)
    from runtime.response_store.sqlite_store import SqliteStore
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
    elif url:
        raise ValueError(f"GREENFRONT_RESPONSES_STORE_URL: not redis:// or sqlite://: {url!r}")
    else:
        path = os.path.join(config.run_dir or ".", SQLITE_FILE)
    return SqliteStore(path, *bounds)
