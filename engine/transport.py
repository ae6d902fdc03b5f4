"""The engine sockets and their green loops, inside the engine-I/O thread.

Owns the frontend side of the wire (docs/engine-protocol.md §1.2): the input ROUTER (requests out,
registrations in), the output PULL (outputs in), and a monitor on the ROUTER that notices an
engine's connection dropping. Decodes every output batch once and gives the pieces to the
``EngineClient``'s callbacks, which route them to the HTTP hub.

Every send happens in one place, the sender greenlet (``_send_loop``): ``post`` only queues.
Callers run inside the thread inbox's watcher callback, where a green socket that had to wait
would raise instead of switching (a callback may not block), and one loop keeps the order.

Runs on: the engine-I/O thread only (zmq.green sockets belong to the hub that made them).
"""
from __future__ import annotations

import logging
import socket
from collections import deque
from typing import Any, Callable

import gevent
import gevent.event
import zmq
import msgspec
import zmq.green as zmq_green
from zmq.utils.monitor import parse_monitor_message

from engine import protocol

log = logging.getLogger("greenfront.transport")

#: How long a send to an engine identity that is not connected (yet) is retried: a restarted
#: gunicorn worker waits this long for the engines' DEALERs to reconnect to its new ROUTER.
UNREACHABLE_RETRY_SECONDS = 5.0


def endpoint_for_fd(fd: int) -> str:
    """The ZMQ endpoint of an inherited listening socket (docs/engine-protocol.md §1.4: derived with getsockname)."""
    sock = socket.socket(fileno=fd)
    try:
        family, name = sock.family, sock.getsockname()
    finally:
        sock.detach()  # the fd stays open: ZMQ adopts it
    if family == socket.AF_UNIX:
        return f"ipc://{name if isinstance(name, str) else name.decode()}"
    host, port = name[0], name[1]
    return f"tcp://[{host}]:{port}" if family == socket.AF_INET6 else f"tcp://{host}:{port}"


class Transport:
    """The input ROUTER + output PULL of one frontend client index.

    Args:
        input_address / output_address: where to bind (or adopt with ``input_fd``/``output_fd``).
        on_registration(rank, payload): an engine's ready message arrived.
        on_outputs(outputs, frames): a decoded ``EngineCoreOutputs`` batch arrived.
        on_dead(reason): the engine reported ENGINE_CORE_DEAD or its connection dropped.
        coordinator_address / on_coordinator(counts, wave, running): the DP coordinator's
            front publisher, and what it says (docs/engine-protocol.md §7.2).
    """

    def __init__(self, *, input_address: str, output_address: str, io_threads: int,
                 on_registration: Callable[[int, bytes], None],
                 on_outputs: Callable[[Any, list], None],
                 on_dead: Callable[[str], None],
                 input_fd: int | None = None, output_fd: int | None = None,
                 coordinator_address: str = "",
                 on_coordinator: Callable[[Any, int, bool], None] | None = None,
                 between_messages: Callable[[], bool] | None = None) -> None:
        self._on_registration = on_registration
        self._between_messages = between_messages
        self._on_outputs = on_outputs
        self._on_dead = on_dead
        self.ctx = zmq_green.Context(io_threads=io_threads)
        self.router = self.ctx.socket(zmq.ROUTER)
        self.pull = self.ctx.socket(zmq.PULL)
        for sock in (self.router, self.pull):
            # NOTE: docs/engine-protocol.md §1.2: vLLM runs unbounded queues; a default HWM of
            # 1000 can drop or block under load.
            sock.setsockopt(zmq.SNDHWM, 0)
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.setsockopt(zmq.LINGER, 0)
        # Errors instead of silent drops when an engine identity is not connected.
        self.router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        if input_fd is not None:
            self.router.setsockopt(zmq.USE_FD, input_fd)
        if output_fd is not None:
            self.pull.setsockopt(zmq.USE_FD, output_fd)
        self.router.bind(input_address)
        self.pull.bind(output_address)
        self._monitor = self.router.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self._outgoing: deque[tuple[Any, list[bytes], Any]] = deque()
        self._outgoing_ready = gevent.event.Event()
        self._greenlets = [gevent.spawn(self._recv_outputs), gevent.spawn(self._recv_router),
                           gevent.spawn(self._watch_connections), gevent.spawn(self._send_loop)]
        self.coordinator = None
        if coordinator_address:
            self.coordinator = self.ctx.socket(zmq.XSUB)
            self.coordinator.setsockopt(zmq.LINGER, 0)
            self.coordinator.connect(coordinator_address)
            self.coordinator.send(b"\x01")  # subscribe to everything
            self._on_coordinator = on_coordinator
            self._greenlets.append(gevent.spawn(self._recv_coordinator))

    def spawn(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` as one more greenlet of this transport (killed by ``close``)."""
        self._greenlets.append(gevent.spawn(fn))

    # -- sending ------------------------------------------------------------------------------
    def post(self, frames: list[bytes],
             on_failed: Callable[[Exception], None] | None = None) -> None:
        """Queue one multipart message to an engine (never blocks); ``on_failed`` hears, in
        the sender greenlet, of a message that could not be delivered."""
        self._outgoing.append((self.router, frames, on_failed))
        self._outgoing_ready.set()

    def post_coordinator(self, payload: bytes) -> None:
        """Queue a message to the DP coordinator (0.32's first-request wave notice)."""
        if self.coordinator is not None:
            self._outgoing.append((self.coordinator, [payload], None))
            self._outgoing_ready.set()

    def _send_loop(self) -> None:
        outgoing, ready = self._outgoing, self._outgoing_ready
        while True:
            ready.wait()
            ready.clear()
            while outgoing:
                sock, frames, on_failed = outgoing.popleft()
                if sock is self.router:
                    self._send(frames, on_failed)
                else:
                    sock.send_multipart(frames)

    def _send(self, frames: list[bytes],
              on_failed: Callable[[Exception], None] | None = None) -> None:
        """Send one multipart message to an engine, retrying while its identity reconnects."""
        try:
            # NOTE: copy=True: pyzmq's zero-copy sends hand buffers to a garbage-collector
            # thread that, under gevent's patched threading, raced and failed ("inproc://
            # pyzmq.gc.01 already in use") and corrupted large ADDs; a memcpy of even an 82k-token
            # prompt (~250 KB) costs microseconds.
            self.router.send_multipart(frames)
            return
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EHOSTUNREACH:
                _report(on_failed, exc)
                return
        gevent.spawn(self._send_when_reachable, frames, on_failed)

    def _send_when_reachable(self, frames: list[bytes],
                             on_failed: Callable[[Exception], None] | None) -> None:
        deadline = gevent.get_hub().loop.now() + UNREACHABLE_RETRY_SECONDS
        delay = 0.01
        while True:
            gevent.sleep(delay)
            try:
                self.router.send_multipart(frames)
                return
            except zmq.ZMQError as exc:
                if exc.errno != zmq.EHOSTUNREACH or gevent.get_hub().loop.now() > deadline:
                    _report(on_failed, exc)
                    return
            delay = min(delay * 2, 0.2)

    # -- receiving ----------------------------------------------------------------------------
    def _recv_outputs(self) -> None:
        recv = self.pull.recv_multipart
        while True:
            frames = recv(copy=False)
            buffers = [f.buffer for f in frames]
            if protocol.is_engine_dead(buffers):
                self._on_dead("the engine core reported ENGINE_CORE_DEAD")
                continue
            try:
                outputs = protocol.decode_outputs(buffers)
            except Exception:
                log.exception("undecodable engine output (%d frames) dropped", len(frames))
                continue
            self._on_outputs(outputs, buffers)
            # A green recv returns at once while the socket holds messages, so a backlog of
            # step messages would be demultiplexed back to back while ADDs and ABORTs handed in
            # meanwhile wait in this hub's inbox (new requests' TTFT behind output dispatch).
            # ``between_messages`` runs them now; sleep(0) then lets the send loop send them.
            # NOTE: not gevent.idle(): it polls, which releases the GIL to the HTTP hub's thread
            # (59 µs per call beside a spinning thread, against 9 µs for sleep(0); a stream run
            # with it lost throughput), and sleep(0) alone resumes before the inbox's watcher.
            if self._between_messages is not None and self._between_messages():
                gevent.sleep(0)

    def _recv_router(self) -> None:
        while True:
            frames = self.router.recv_multipart()
            if len(frames) < 2:
                continue
            rank = int.from_bytes(frames[0], "little")
            self._on_registration(rank, frames[1])

    def _watch_connections(self) -> None:
        while True:
            event = parse_monitor_message(self._monitor.recv_multipart())
            if event["event"] == zmq.EVENT_DISCONNECTED:
                self._on_dead("an engine's connection to this frontend was lost")

    def _recv_coordinator(self) -> None:
        decode = msgspec.msgpack.decode
        while True:
            payload = self.coordinator.recv()
            try:
                counts, wave, running = decode(payload)[:3]
            except Exception:
                log.warning("undecodable DP coordinator message dropped")
                continue
            self._on_coordinator(counts, wave, running)

    def close(self) -> None:
        for greenlet in self._greenlets:
            greenlet.kill(block=False)
        for sock in (self._monitor, self.router, self.pull, self.coordinator):
            if sock is not None:
                sock.close(linger=0)
        self.ctx.term()


def _report(on_failed: Callable[[Exception], None] | None, error: Exception) -> None:
    if on_failed is None:
        log.error("could not send to an engine: %s", error)
    else:
        on_failed(error)
