"""Cross-thread hand-off into a hub: a deque drained by one async watcher.

The only bridge between native threads and a hub (docs/architecture.md §5.2): producers append to a
``collections.deque`` (atomic under the GIL) and call ``watcher.send()``, which is thread-safe and
coalesces; the hub runs the callback once per wake-up and drains everything queued. Events, green
sockets and ``AsyncResult`` objects never cross threads.

Runs on: created in the consuming hub's thread; ``post`` from any thread.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Callable, Generic, TypeVar

import gevent

T = TypeVar("T")

log = logging.getLogger("greenfront.handoff")


class HubInbox(Generic[T]):
    """Delivers items posted from any thread to ``handler`` inside the creating thread's hub.

    Args:
        handler: called in the owning hub with a list of every item queued since the last call.
    """

    def __init__(self, handler: Callable[[list[T]], None]) -> None:
        self._items: deque[T] = deque()
        self._handler = handler
        self._hub = gevent.get_hub()
        self._watcher = self._hub.loop.async_()
        self._watcher.start(self._drain)

    def post(self, item: T) -> None:
        """Thread-safe: queue one item and wake the owning hub."""
        self._items.append(item)
        self._watcher.send()

    def _drain(self) -> None:
        self.drain_pending()

    def drain_pending(self) -> bool:
        """Owning hub only: hand what is queued now to the handler without waiting for the
        watcher (which then finds nothing); True if there was something."""
        items = self._items
        batch = []
        pop = items.popleft
        while items:
            batch.append(pop())
        if batch:
            self._handler(batch)
        return bool(batch)

    def close(self) -> None:
        self._watcher.stop()
        self._watcher.close()


def run_each(calls: list[Callable[[], None]]) -> None:
    """A ``HubInbox`` handler for inboxes of callables: run each, logging (not raising) errors,
    so one failing call never drops the rest of the batch."""
    for fn in calls:
        try:
            fn()
        except Exception:
            log.exception("call handed to the hub failed")
