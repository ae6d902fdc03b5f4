"""The worker bus: small messages from one gunicorn worker to every other worker of the
deployment.

Some requests concern the whole deployment, not the worker that happens to answer them:
``POST /inference/v1/abort_requests`` names requests that may run on any worker, and a scrape of
``/metrics`` must count what every worker gathered so far. Each worker binds one Unix datagram
socket, ``bus-<slot>.sock`` in the run directory; ``broadcast`` sends one datagram to each other
slot's socket, and a receiver greenlet hands each message to the handler registered for its
topic. ``ask`` does the same and waits (bounded) until every worker it reached answered.
Delivery is best effort (a worker that is restarting misses what is sent meanwhile): an abort
is not waited for by vLLM either, and a scrape that a busy worker does not answer in time shows
that worker's figures as of its last periodic flush.

Owning thread: the HTTP hub of each worker (socket, receiver greenlet, handlers).
"""
from __future__ import annotations

import itertools
import logging
import os
from typing import Any, Callable

import gevent
import gevent.event
from gevent import socket

from base import jsonio

log = logging.getLogger("greenfront.bus")

#: Largest message: a datagram is delivered whole or not at all.
MAX_MESSAGE = 64 * 1024


class WorkerBus:
    """This worker's end of the bus (``slot`` of ``count`` workers sharing ``run_dir``)."""

    def __init__(self, run_dir: str, slot: int, count: int) -> None:
        self._run_dir, self._slot, self._count = run_dir, slot, count
        self._handlers: dict[str, Callable[[Any], Any]] = {}
        self._asks = itertools.count(1)
        #: ask id -> [answers still expected, the event that wakes the asker]
        self._waiting: dict[int, list] = {}
        self._sock: socket.socket | None = None
        self._receiver: gevent.Greenlet | None = None

    def path(self, slot: int) -> str:
        return os.path.join(self._run_dir, f"bus-{slot}.sock")

    def on(self, topic: str, handler: Callable[[Any], Any]) -> None:
        """Call ``handler(data)`` in this worker's hub for each ``topic`` message of another
        (for an ``ask``, in its own greenlet, and its return value is the answer)."""
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

    def ask(self, topic: str, data: Any, timeout: float) -> int:
        """Send ``data`` to every other worker and wait until each reached has handled it (at
        most ``timeout`` seconds); how many answered."""
        ask_id = next(self._asks)
        done = gevent.event.Event()
        waiting = self._waiting[ask_id] = [0, done]
        try:
            sent = self.broadcast(topic, data, ask=ask_id)
            waiting[0] += sent
            if waiting[0] > 0:
                done.wait(timeout)
            return sent - max(waiting[0], 0)
        finally:
            del self._waiting[ask_id]

    def broadcast(self, topic: str, data: Any, ask: int = 0) -> int:
        """Send ``data`` to every other worker; how many sockets took it."""
        if self._sock is None:
            return 0
        message = jsonio.dumps({"topic": topic, "data": data, "ask": ask, "from": self._slot})
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
                self._dispatch(jsonio.loads(data))
            except Exception:  # one bad message must not end the bus
                log.exception("worker bus: could not handle a message")

    def _dispatch(self, message: dict) -> None:
        topic, ask = message["topic"], message.get("ask", 0)
        if topic == "answer":
            waiting = self._waiting.get(ask)
            if waiting is not None:
                waiting[0] -= 1
                if waiting[0] == 0:
                    waiting[1].set()
            return
        handler = self._handlers.get(topic)
        if not ask:
            if handler is not None:
                handler(message["data"])
            return
        gevent.spawn(self._answer, handler, message["data"], ask, message["from"])

    def _answer(self, handler: Callable[[Any], Any] | None, data: Any, ask: int,
                to: int) -> None:
        try:
            if handler is not None:
                handler(data)
        finally:
            if self._sock is not None:
                try:
                    self._sock.sendto(jsonio.dumps({"topic": "answer", "ask": ask}),
                                      self.path(to))
                except OSError as exc:
                    log.debug("worker bus: cannot answer slot %d: %s", to, exc)
