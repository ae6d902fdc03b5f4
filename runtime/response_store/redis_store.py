"""The responses store in Redis, for deployments on several hosts sharing one Redis server.

Each record is a key with the age bound as its TTL; a sorted set orders the ids by storing time,
and beyond the size bound the oldest are removed from both.

Owning thread: each native pool thread owns its own ``redis.Redis`` client (keyed by
``threading.get_native_id``): under gevent's monkey-patching a client's sockets belong to the
thread (and hub) that opened them, so no client is shared between threads.

Runs on: request pool threads.
"""
from __future__ import annotations

import threading
import time

import redis

PREFIX = "greenfront:responses:"
ORDER = PREFIX + "order"


class RedisStore:
    """``ResponseStore`` over a Redis server (``url``: ``redis://host:port/db``)."""

    def __init__(self, url: str, max_entries: int, max_age: float) -> None:
        self.url = url
        self.max_entries = max_entries
        self.max_age = max_age
        self._clients: dict[int, redis.Redis] = {}

    def _client(self) -> redis.Redis:
        tid = threading.get_native_id()
        client = self._clients.get(tid)
        if client is None:
            client = self._clients.setdefault(tid, redis.Redis.from_url(self.url))
        return client

    def put(self, response_id: str, record: bytes) -> None:
        client = self._client()
        now = time.time()
        ttl = max(1, int(self.max_age))
        pipe = client.pipeline(transaction=True)
        pipe.set(PREFIX + response_id, record, ex=ttl)
        pipe.zadd(ORDER, {response_id: now})
        pipe.zremrangebyscore(ORDER, "-inf", now - self.max_age)
        pipe.zcard(ORDER)
        count = pipe.execute()[-1]
        if count > self.max_entries:
            oldest = client.zpopmin(ORDER, count - self.max_entries)
            if oldest:
                client.delete(*[PREFIX + member.decode() for member, _ in oldest])

    def get(self, response_id: str) -> bytes | None:
        return self._client().get(PREFIX + response_id)
