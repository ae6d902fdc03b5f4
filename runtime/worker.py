"""greenfront's gunicorn worker: gunicorn's gevent worker with the few overrides greenfront needs.

The one seam between greenfront and gunicorn (``gunicorn.conf.py`` selects it as
``worker_class``). The master hands each worker its configuration and slot (``assign``, from the
``pre_fork`` hook); after fork the worker builds what it serves with (``Serving``: the
configuration for its slot, the ``WorkerState``, the ``Drain``), which ``app.py`` picks up with
``current_serving`` when gunicorn loads ``app:api``. The worker then:

- starts the engine client and waits (bounded) for the engines before it accepts connections,
  so a fresh or restarted worker takes no request it could only answer with 503;
- settles gunicorn's settings and caches what gunicorn recomputes per request
  (``runtime.gunicorn_hot_path``; rebuilt on SIGUSR1, when the log files are reopened);
- serves each listener with ``runtime.accept.PromptStartServer`` (batched accepts, connection
  greenlets started at once): gunicorn's HTTP sockets and the ``Serving.listeners`` the
  application adds (the gRPC listener, ``rpc/server.py``);
- on SIGTERM starts the drain (``runtime.shutdown``: 503 for new requests, in-flight ones finish
  within ``--shutdown-timeout``) beside gunicorn's own stop, and closes the idle keep-alive
  connections at its end;
- stops the engine client when it leaves.

Runs on: the gunicorn master (``assign``) and the worker's main thread, the HTTP hub (the rest).
"""
from __future__ import annotations

import dataclasses
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Iterable

import gevent
import gevent.socket
from gevent.pool import Pool
from gunicorn.sock import ssl_context
from gunicorn.workers.ggevent import GeventWorker

from runtime import gunicorn_hot_path
from runtime.accept import KnownNameListener, PromptStartServer
from runtime.shutdown import Drain

if TYPE_CHECKING:
    from base.config import Config
    from runtime.state import WorkerState


@dataclasses.dataclass(frozen=True)
class Listener:
    """A listening socket the worker serves beside gunicorn's HTTP ones (the gRPC listener):
    made in the master, so the workers share it; ``handle(sock, address)`` serves one accepted
    connection. The application (``app.py``) adds it, since the layers above build the handler."""

    fd: int
    handle: Callable[[Any, Any], None]
    #: With TLS on (the HTTP side's certificate): the ALPN protocols it offers (gRPC: h2).
    alpn: tuple[str, ...] = ("h2",)


@dataclasses.dataclass(frozen=True)
class Serving:
    """What one worker serves with: built once per worker process, after fork."""

    config: "Config"
    state: "WorkerState"
    drain: Drain
    listeners: list[Listener] = dataclasses.field(default_factory=list)


#: The serving parts of this worker process. Owning thread: the worker's main thread (the HTTP
#: hub), which sets it once after fork, before gunicorn loads the application.
_serving: Serving | None = None


def current_serving() -> Serving | None:
    """This process's ``Serving`` when it is a greenfront worker, else None (a bare import)."""
    return _serving


def free_slot(taken: Iterable[int | None], worker_count: int) -> int:
    """The lowest slot no live worker holds. Slots index the engines' INIT address lists, so they
    stay below the worker count; a restarted worker takes its predecessor's slot, binds the same
    addresses, and the engines reconnect to it."""
    used = set(taken)
    return next((slot for slot in range(worker_count) if slot not in used), 0)


class GreenfrontWorker(GeventWorker):
    """gunicorn's gevent worker serving greenfront (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config: "Config | None" = None
        self.slot = 0
        self._servers: list[PromptStartServer] = []

    def assign(self, config: "Config", slot: int) -> None:
        """In the master, before fork: the deployment's configuration and this worker's slot."""
        self.config, self.slot = config, slot

    def load_wsgi(self) -> None:
        """After fork, gevent's patching and the signal handlers (gunicorn's init_process): build
        this worker's ``Serving``, then let gunicorn load ``app:api``, which serves with it."""
        global _serving
        # PERF: by default every Greenlet records the stack that spawned it (a debugging aid), a
        # stack walk per connection and per disconnect watcher; long prompts went from 154-162 to
        # 168-179 req/s without it (make bench --quick --long-concurrency 32, two A/B pairs).
        gevent.config.track_greenlet_tree = False
        from runtime.state import WorkerState  # after fork: it builds the metrics (runtime.metrics)

        assert self.config is not None, "the master's pre_fork hook assigns it"
        config = self.config.for_worker(self.slot)
        state = WorkerState(config)
        _serving = Serving(config, state, Drain.for_worker(config, state, self.close_idle))
        state.before_halt = _serving.drain.answer_in_flight
        gunicorn_hot_path.install(self.cfg)
        super().load_wsgi()

    @property
    def serving(self) -> Serving:
        assert _serving is not None, "init_process builds it"
        return _serving

    def run(self) -> None:
        state = self.serving.state
        state.start()
        state.wait_for_engines(self.notify)
        ssl_args = {"ssl_context": ssl_context(self.cfg)} if self.cfg.is_ssl else {}
        for sock in self.sockets:
            sock.setblocking(1)
            # gunicorn's handle closes the client itself, and asks the listener's name per
            # connection: both answered once here (runtime/accept.py).
            server = PromptStartServer(sock, handle=partial(self.handle, KnownNameListener(sock)),
                                       spawn=Pool(self.worker_connections), handler_closes=True,
                                       **ssl_args)
            server.start()
            self._servers.append(server)
        for listener in self.serving.listeners:
            sock = gevent.socket.socket(fileno=listener.fd)
            tls = {}
            if self.cfg.is_ssl:  # the HTTP side's certificate, and the protocol it names
                context = ssl_context(self.cfg)
                context.set_alpn_protocols(list(listener.alpn))
                tls = {"ssl_context": context}
            server = PromptStartServer(sock, handle=listener.handle,
                                       spawn=Pool(self.worker_connections), **tls)
            server.start()
            self._servers.append(server)
        try:
            while self.alive:
                self.notify()
                gevent.sleep(1.0)
            self._finish()
        finally:
            state.stop()

    def _finish(self) -> None:
        """Stop accepting, let the connections in hand end within gunicorn's graceful timeout
        (the drain ends them sooner), then kill what is left."""
        for server in self._servers:
            server.close()
        deadline = time.time() + self.cfg.graceful_timeout
        while time.time() <= deadline:
            if all(server.pool.free_count() == server.pool.size for server in self._servers):
                return
            self.notify()
            gevent.sleep(1.0)
        self.log.warning("Worker graceful timeout (pid:%s)", self.pid)
        for server in self._servers:
            server.stop(timeout=1)

    def close_idle(self) -> None:
        """At the end of a drain, when only idle keep-alive connections are left: close them
        all, so the worker exits without waiting out their keep-alive timeout."""
        for server in self._servers:
            server.close_all()

    def handle_usr1(self, sig: int, frame: Any) -> None:
        """SIGUSR1: gunicorn reopens the log files (in a greenlet); then the cached base environ
        is rebuilt, so its ``wsgi.errors`` writes to the new streams."""
        super().handle_usr1(sig, frame)
        gevent.spawn(gunicorn_hot_path.refresh)

    def handle_exit(self, sig: int, frame: Any) -> None:
        """SIGTERM: the drain runs beside gunicorn's stop (the loop waits graceful_timeout for
        the connections the drain ends)."""
        if _serving is not None:  # else the worker is still starting: nothing to drain
            _serving.drain.start_on_signal()
        super().handle_exit(sig, frame)
