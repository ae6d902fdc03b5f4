"""The worker bus: small messages from one gunicorn worker to every other worker of the
deployment.

Some requests concern the whole deployment, not the worker that happens to answer them:
``POST /inference/v1/abort_requests`` names requests that may run on any worker. Each worker binds
one Unix datagram socket, ``bus-<slot>.sock`` in the run directory; ``broadcast`` sends one
datagram to each other slot's socket, and a receiver greenlet hands each message to the handler
registered for its topic. Delivery is best effort (a worker that is restarting misses what is
sent meanwhile), which is what its users need: vLLM's own answers to them do not wait either.

Owning thread: the HTTP hub of each worker (socket, receiver greenlet, handlers).
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable

import gevent
from gevent import socket

from base import jsonio

log = logging.getLogger("greenfront.bus")

#: Largest message: a datagram is delivered whole or not at all.
MAX_MESSAGE = 64 * 1024


class WorkerBus:
    """This worker's end of the bus (``slot`` of ``count`` workers sharing ``run_dir``)."""

    def __init__(self, run_dir: str, slot: int, count: int) -> None:
        self._run_dir, self._slot, self._count = run_dir, slot, count
        self._handlers: dict[str, Callable[[Any], None]] = {}
        self._sock: socket.socket | None = None
        self._receiver: gevent.Greenlet | None = None

    def path(self, slot: int) -> str:
        return os.path.join(self._run_dir, f"bus-{slot}.sock")

    def on(self, topic: str, handler: Callable[[Any], None]) -> None:
        """Call ``handler(data)`` in this worker's hub for each ``topic`` message of another."""
        self._handlers[topic] = handler

    def start(self) -> None:
        """Bind this slot's socket (a restarted worker takes over its predecessor's)."""
        path = self.path(self._slot)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        self._sock = sock
        self._receiver = gevent.spawn(self._receive)

    def stop(self) -> None:
        if self._receiver is not None:
            self._receiver.kill(block=False)
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def broadcast(self, topic: str, data: Any) -> int:
        """Send ``data`` to every other worker; how many sockets took it."""
        if self._sock is None:
            return 0
        message = jsonio.dumps({"topic": topic, "data": data})
        if len(message) > MAX_MESSAGE:
            raise ValueError(f"worker bus message of {len(message)} bytes (max {MAX_MESSAGE})")
        sent = 0
        for slot in range(self._count):
            if slot == self._slot:
                continue
            try:
                self._sock.sendto(message, self.path(slot))
                sent += 1
            except OSError as exc:  # that worker is not up (yet, or any more)
                log.debug("worker bus: slot %d unreachable: %s", slot, exc)
        return sent

    def _receive(self) -> None:
        sock = self._sock
        while sock is not None and sock.fileno() >= 0:
            try:
                data = sock.recv(MAX_MESSAGE)
            except OSError:
                return
            try:
                message = jsonio.loads(data)
                handler = self._handlers.get(message["topic"])
                if handler is not None:
                    handler(message["data"])
            except Exception:  # one bad message must not end the bus
                log.exception("worker bus: could not handle a message")
