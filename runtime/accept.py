"""How a greenfront worker takes new connections: in batches, and handled at once.

``PromptStartServer`` is the ``StreamServer`` the worker (``runtime.worker``) serves each
listener with. It differs from gevent's in two ways:

- ``max_accept``: with several workers gunicorn's own gevent worker accepts one connection per
  loop iteration (to spread them over workers). Under streaming load that left 200+ connections,
  /health probes among them, in the listen backlog for 1-4 s (make bench). Up to 32 at a time
  keeps them flowing; the kernel still spreads accepts over the workers idle in accept().
- A new connection's greenlet starts inside the accept callback instead of being queued behind
  the hub's pending callbacks. Every stream woken by an engine step is such a callback; a
  saturated hub had thousands queued (over 600 ms of work), and each /health waited behind them
  (p50 0.8 s under 1,024 streams, make bench). Io callbacks, accept among them, run between
  bounded slices of that queue, so a probe is now read and answered within one slice. Later
  wake-ups of the connection (socket readiness) are io callbacks too; only its start moves.

Runs on: the HTTP hub (the accept watcher's callback).
"""
from __future__ import annotations

from typing import Any

from gevent.pool import Pool
from gevent.server import StreamServer

ACCEPT_BATCH = 32


class PromptStartServer(StreamServer):
    """``StreamServer`` that accepts in batches and starts each connection's greenlet at once."""

    max_accept = ACCEPT_BATCH

    def do_handle(self, *args: Any) -> None:
        pool = self.pool
        if not isinstance(pool, Pool):  # no pool to bound the connections: gevent's behaviour
            return super().do_handle(*args)
        glet = pool.greenlet_class(_handle_then_close, self._handle, self.do_close, args)
        try:
            # The server checks ``full()`` before accepting, so this never blocks the hub.
            pool.add(glet, blocking=False)
        except BaseException:
            self.do_close(*args)
            raise
        # From the hub (we are in the accept callback) an unstarted greenlet runs until it
        # first blocks, then the hub carries on from here: what a started timer or io wait does.
        glet.switch()

    def close_all(self) -> None:
        """Stop accepting and close every connection still open."""
        self.close()
        if isinstance(self.pool, Pool):
            self.pool.kill(block=False)


def _handle_then_close(handle: Any, close: Any, args: tuple) -> None:
    try:
        handle(*args)
    finally:
        close(*args)
