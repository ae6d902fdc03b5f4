"""The engine-I/O thread: one native thread running its own gevent hub.

The engine client's green ZMQ loops (send ADD/ABORT/UTILITY, receive outputs, registrations)
run as greenlets in this hub so that decoding engine outputs never competes with HTTP greenlets
for the HTTP hub. Work is handed in with ``call`` (a ``HubInbox`` owned by this thread).

Runs on: started from the HTTP hub (after fork); everything else runs in the thread itself.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

import gevent
import gevent.event
from gevent import monkey

from base.handoff import HubInbox, run_each

log = logging.getLogger("greenfront.engine_thread")

# NOTE: gunicorn's gevent worker calls patch_all(): threading.Thread would be a greenlet.
_start_new_thread = monkey.get_original("_thread", "start_new_thread")
_allocate_lock = monkey.get_original("_thread", "allocate_lock")


class EngineThread:
    """A native thread with its own hub, running ``main`` as its first greenlet.

    Args:
        main: called inside the new thread's hub with this object; it starts the I/O greenlets
            and returns. The hub then runs until ``stop``.
    """

    def __init__(self, main: Callable[["EngineThread"], None], name: str = "engine-io") -> None:
        self._main = main
        self.name = name
        self._inbox: HubInbox[Callable[[], None]] | None = None
        self._started = _allocate_lock()
        self._started.acquire()
        self._stopping = False
        self.ident: int | None = None

    def start(self) -> None:
        _start_new_thread(self._run, ())
        # Wait (natively; a few ms) until the thread's inbox exists so ``call`` is usable at once.
        self._started.acquire()
        self._started.release()

    def _run(self) -> None:
        self.ident = threading.get_ident()
        hub = gevent.get_hub()
        self._stop_event = gevent.event.Event()
        self._inbox = HubInbox(run_each)
        try:
            self._main(self)
        except BaseException:  # the I/O thread must report, not vanish silently
            log.exception("engine I/O thread failed to start")
        finally:
            self._started.release()
        try:
            self._stop_event.wait()
        finally:
            self._inbox.close()
            hub.destroy(destroy_loop=True)

    def call(self, fn: Callable[[], None]) -> None:
        """Thread-safe: run ``fn`` inside this thread's hub as soon as possible."""
        assert self._inbox is not None, "EngineThread.start() was not called"
        self._inbox.post(fn)

    def run_pending(self) -> bool:
        """This thread only: run the calls handed in so far, now (True if there were any)."""
        return self._inbox is not None and self._inbox.drain_pending()

    def stop(self) -> None:
        """Thread-safe and non-blocking: ask the thread's hub to finish."""
        if self._inbox is not None and not self._stopping:
            self._stopping = True
            self.call(self._stop_event.set)
