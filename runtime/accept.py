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

Two per-connection costs of gunicorn's handler are answered here (``runtime.worker`` asks for
them): ``handler_closes`` starts the handler alone when it closes the connection itself
(gunicorn's does, in its ``finally``), instead of wrapping it in a second close; and
``KnownNameListener`` answers the listener's name, which gunicorn's handler asks the kernel for
on every connection (``getsockname``), from the name read once.

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

    def __init__(self, listener: Any, handle: Any = None, spawn: Any = "default",
                 handler_closes: bool = False, **ssl_args: Any) -> None:
        super().__init__(listener, handle=handle, spawn=spawn, **ssl_args)
        #: The handler closes the client socket whatever happens (not with TLS: there it gets
        #: the TLS socket, and the one accepted is the server's to close).
        self._handler_closes = handler_closes and self.ssl_args is None

    def do_handle(self, *args: Any) -> None:
        pool = self.pool
        if not isinstance(pool, Pool):  # no pool to bound the connections: gevent's behaviour
            return super().do_handle(*args)
        if self._handler_closes:
            # PERF: one frame and one close() fewer per connection, ~0.6 µs (a second close of
            # a gevent socket is a no-op that still costs a call).
            glet = pool.greenlet_class(self._handle, *args)
        else:
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


class KnownNameListener:
    """A listening socket as gunicorn's connection handler sees it: its name, read once.

    PERF: gunicorn's handler calls ``listener.getsockname()`` for every connection (a system
    call, ~0.7 µs); the listener is bound before the worker starts, so its name never changes.
    Anything else is the socket's."""

    __slots__ = ("_sock", "_name")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._name = sock.getsockname()

    def getsockname(self) -> Any:
        return self._name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _handle_then_close(handle: Any, close: Any, args: tuple) -> None:
    try:
        handle(*args)
    finally:
        close(*args)
