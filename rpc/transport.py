"""gRPC's HTTP/2 transport on a gevent socket: one ``Connection`` per client connection.

The connection's greenlet reads the socket and feeds ``h2``'s state machine; each call (an HTTP/2
stream) runs in its own greenlet once its request has ended, so one connection carries many
concurrent calls. Writes from the calls' greenlets go through one lock (``h2`` frames them in the
order they were made; ``sendall`` may yield midway). Received data is acknowledged as it arrives
(the peer's uploads never stall); sent data waits for the peer's window. A reset stream or a lost
connection cancels its calls (their engine requests are aborted). ``grpc-timeout`` becomes a
timer that cancels the call and ends it with DEADLINE_EXCEEDED. Compressed requests are refused
(greenfront accepts the ``identity`` encoding only, as its ``grpc-accept-encoding`` says).

Runs on: the HTTP hub of a gunicorn worker (every greenlet here).
"""
from __future__ import annotations

import logging
import socket
from typing import Any, Callable

import gevent
import gevent.event
import gevent.lock
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import hyperframe.frame

from rpc.call import Call, StreamGone
from rpc.framing import MAX_RECEIVE_BYTES
from rpc.status import Code

log = logging.getLogger("greenfront.grpc")

_READ = 1 << 16
#: Our receive window: large, so a client's request body never waits for an acknowledgement.
_WINDOW = 1 << 22


class Connection:
    """One client connection (module docstring).

    Args:
        sock: the accepted gevent socket.
        on_call: starts the work of a call whose request has ended (``rpc.dispatch``).
    """

    def __init__(self, sock: socket.socket, on_call: Callable[[Call], None]) -> None:
        self.sock = sock
        self.on_call = on_call
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=False, header_encoding="utf-8"))
        self.calls: dict[int, Call] = {}
        self._write_lock = gevent.lock.Semaphore()
        self._window_waiters: list[gevent.event.Event] = []
        self.closed = False
        self.going_away = False

    def serve(self) -> None:
        """Serve until the peer closes the connection or breaks the protocol."""
        conn = self.h2
        conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: _WINDOW,
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000})
        conn.initiate_connection()
        conn.increment_flow_control_window(_WINDOW)
        try:
            self.flush()
            while not self.closed:
                data = self.sock.recv(_READ)
                if not data:
                    break
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError as exc:
                    log.info("gRPC connection closed: protocol error: %s", exc)
                    self.flush()
                    break
                for event in events:
                    self._on_event(event)
                self.flush()
        except OSError:
            pass
        finally:
            self._close()

    def _on_event(self, event: Any) -> None:
        if isinstance(event, h2.events.RequestReceived):
            headers = dict(event.headers)
            self.calls[event.stream_id] = Call(self, event.stream_id, headers)
            if event.stream_ended is not None:
                self._start(event.stream_id)
        elif isinstance(event, h2.events.DataReceived):
            self._on_data(event)
        elif isinstance(event, h2.events.StreamEnded):
            self._start(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            call = self.calls.pop(event.stream_id, None)
            if call is not None:
                call.on_gone()
            self._wake_senders()
        elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            self._wake_senders()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.closed = True

    def _on_data(self, event: h2.events.DataReceived) -> None:
        if event.flow_controlled_length:
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        call = self.calls.get(event.stream_id)
        if call is None or call.finished:
            return
        call.body += event.data
        if len(call.body) > MAX_RECEIVE_BYTES + 5:
            call.finish(Code.RESOURCE_EXHAUSTED, "Received message larger than max "
                        f"({len(call.body) - 5} vs. {MAX_RECEIVE_BYTES})")

    def _start(self, stream_id: int) -> None:
        call = self.calls.get(stream_id)
        if call is None or call.finished:
            return
        self.on_call(call)

    def call_done(self, call: Call) -> None:
        self.calls.pop(call.stream_id, None)

    # Sending (any call's greenlet)

    def send_headers(self, stream_id: int, headers: list, end_stream: bool) -> None:
        if self.closed:
            raise StreamGone()
        try:
            self.h2.send_headers(stream_id, headers, end_stream=end_stream)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            raise StreamGone() from None
        self.flush()

    def send_data(self, call: Call, data: bytes) -> None:
        """Send ``data`` on the call's stream as the peer's flow-control windows allow."""
        view = memoryview(data)
        while view:
            if call.gone or self.closed:
                raise StreamGone()
            try:
                window = min(self.h2.local_flow_control_window(call.stream_id),
                             self.h2.max_outbound_frame_size)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                raise StreamGone() from None
            if window <= 0:
                waiter = gevent.event.Event()
                self._window_waiters.append(waiter)
                waiter.wait()
                continue
            chunk, view = view[:window], view[window:]
            try:
                self.h2.send_data(call.stream_id, chunk.tobytes())
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                raise StreamGone() from None
            self.flush()

    def flush(self) -> None:
        """Write what ``h2`` has queued (one writer at a time, in ``h2``'s order)."""
        with self._write_lock:
            data = self.h2.data_to_send()
            if data and not self.closed:
                try:
                    self.sock.sendall(data)
                except OSError:
                    self._lost()

    def go_away(self) -> None:
        """The worker drains: tell the peer to open no new calls; running ones finish.

        ``h2``'s own ``close_connection`` ends the connection for every stream, so the GOAWAY
        frame is written here, after what ``h2`` queued, and ``h2`` keeps serving the streams
        it names as processed. A call the peer still opens is refused UNAVAILABLE."""
        if self.closed or self.going_away:
            return
        self.going_away = True
        frame = hyperframe.frame.GoAwayFrame(0)
        frame.last_stream_id = self.h2.highest_inbound_stream_id
        frame.error_code = h2.errors.ErrorCodes.NO_ERROR
        with self._write_lock:
            data = self.h2.data_to_send() + frame.serialize()
            try:
                self.sock.sendall(data)
            except OSError:
                self._lost()

    def _wake_senders(self) -> None:
        waiters, self._window_waiters = self._window_waiters, []
        for waiter in waiters:
            waiter.set()

    def _lost(self) -> None:
        self.closed = True
        for call in list(self.calls.values()):
            call.on_gone()
        self._wake_senders()

    def _close(self) -> None:
        self._lost()
        self.calls.clear()
        try:
            self.sock.close()
        except OSError:
            pass
