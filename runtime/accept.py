"""How a gunicorn gevent worker takes new connections: in batches, and handled at once.

Two changes to gevent's ``StreamServer`` as gunicorn's gevent worker uses it, installed after
fork (``install``):

- ``max_accept``: with several workers gunicorn accepts one connection per loop iteration (to
  spread them over workers). Under streaming load that left 200+ connections, /health probes
  among them, in the listen backlog for 1-4 s (make bench). Up to 32 at a time keeps them
  flowing; the kernel still spreads accepts over the workers idle in accept().
- A new connection's greenlet starts inside the accept callback instead of being queued behind
  the hub's pending callbacks. Every stream woken by an engine step is such a callback; a
  saturated hub had thousands queued (over 600 ms of work), and each /health waited behind them
  (p50 0.8 s under 1,024 streams, make bench). Io callbacks, accept among them, run between
  bounded slices of that queue, so a probe is now read and answered within one slice. Later
  wake-ups of the connection (socket readiness) are io callbacks too; only its start moves.

Runs on: the HTTP hub (the accept watcher's callback).
"""
from __future__ import annotations

import weakref
from typing import Any

from gevent.pool import Pool
from gevent.server import StreamServer

ACCEPT_BATCH = 32
#: The servers of this worker, for ``close_idle``.
_servers: "weakref.WeakSet[PromptStartServer]" = weakref.WeakSet()


class PromptStartServer(StreamServer):
    """``StreamServer`` that accepts in batches and starts each connection's greenlet at once."""

    max_accept = property(lambda self: ACCEPT_BATCH, lambda self, value: None)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _servers.add(self)

    def do_handle(self, *args: Any) -> None:
        pool = self.pool
        if not isinstance(pool, Pool):  # not gunicorn's set-up: keep gevent's behaviour
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


def _handle_then_close(handle: Any, close: Any, args: tuple) -> None:
    try:
        handle(*args)
    finally:
        close(*args)


def close_idle() -> None:
    """Stop accepting and close every connection still open (at the end of a drain, when only
    idle keep-alive connections are left), so gunicorn's worker exits without waiting out their
    keep-alive timeout."""
    for server in list(_servers):
        server.close()
        if isinstance(server.pool, Pool):
            server.pool.kill(block=False)


def install() -> None:
    """Make gunicorn's gevent worker build its servers from ``PromptStartServer``, and make
    spawning the greenlet of each connection cheaper."""
    import gevent
    from gunicorn.workers import ggevent

    ggevent.StreamServer = PromptStartServer
    # PERF: by default every Greenlet records the stack that spawned it (a debugging aid), a
    # stack walk per connection and per disconnect watcher; long prompts went from 154-162 to
    # 168-179 req/s without it (make bench --quick --long-concurrency 32, two A/B pairs).
    gevent.config.track_greenlet_tree = False
