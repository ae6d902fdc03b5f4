"""A request's cancellation: set when its client has gone.

The offload driver (``middleware/offload.py``) makes one per offloaded request and puts it in the
WSGI environ under ``CANCEL_KEY``; request work checks ``cancelled`` between steps, and response
bodies register their engine aborts with ``on_cancel``.

Runs on: made and cancelled in the HTTP hub (the disconnect watcher); ``cancelled`` is read from
pool threads (a plain bool under the GIL). ``on_cancel`` callbacks run in the thread that cancels.
"""
from __future__ import annotations

import logging
from typing import Callable

log = logging.getLogger("greenfront.cancellation")

#: Where the offload driver leaves a request's ``Cancellation`` in the WSGI environ.
CANCEL_KEY = "greenfront.cancel"


class Cancellation:
    """Set when the client has gone; work checks it, bodies register their aborts on it."""

    __slots__ = ("cancelled", "_callbacks")

    def __init__(self) -> None:
        self.cancelled = False
        self._callbacks: list[Callable[[], None]] = []

    def on_cancel(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when cancelled (at once if that already happened)."""
        if self.cancelled:
            fn()
        else:
            self._callbacks.append(fn)

    def discard(self, fn: Callable[[], None]) -> None:
        """Forget a callback registered with ``on_cancel`` (its work is over).

        PERF: a streamed body registers its own bound method, so body -> cancellation -> body
        was a reference cycle holding each finished request's whole graph (~30 objects) until
        a full collection: ~15k objects per collection under 1,024 streams, found at a full
        collection every ~2.5 s that walked them all (py-spy/perf: gc 11% of a worker's CPU)."""
        try:
            self._callbacks.remove(fn)
        except ValueError:
            pass

    def cancel(self) -> None:
        """Mark cancelled and run the callbacks once, logging (not raising) their failures."""
        if self.cancelled:
            return
        self.cancelled = True
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn()
            except Exception:
                log.exception("cancel callback failed")
