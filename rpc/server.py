"""What a worker serves on its gRPC listener: the services' routes and the connection handler.

``handler_for`` gives what the worker runs per accepted connection (``runtime.worker.Listener``). Calls
count in the worker's drain like HTTP requests; once the drain began, each connection is told to
open no new calls (GOAWAY), and a call that still arrives is refused with UNAVAILABLE.

Runs on: each worker's HTTP hub.
"""
from __future__ import annotations

import logging
import socket
from typing import Any, Callable

from base.config import Config
from rpc.control import ControlService
from rpc.dispatch import Method, serve_connection
from rpc.health import HealthService
from rpc.inference.service import InferenceService
from rpc.transport import Connection
from runtime.request_pool import get_pool
from runtime.shutdown import Drain
from runtime.state import WorkerState

log = logging.getLogger("greenfront.grpc")


class GrpcServer:
    """The gRPC side of one worker: its routes and its open connections."""

    def __init__(self, state: WorkerState, drain: Drain, config: Config) -> None:
        self._drain = drain
        self.connections: set[Connection] = set()
        methods: dict[str, Method] = {}
        inference = InferenceService(state, lambda: get_pool(config), drain)
        methods.update(inference.methods())
        methods.update(ControlService(state, inference.abort).methods())
        methods.update(HealthService(state, lambda: drain.draining).methods())
        self._methods = methods
        previous = drain.on_draining

        def on_draining() -> None:
            if previous is not None:
                previous()
            for conn in list(self.connections):
                conn.go_away()
        drain.on_draining = on_draining

    def route(self, path: str) -> Method | None:
        return self._methods.get(path)

    def handle(self, sock: socket.socket, address: Any) -> None:
        """One accepted connection, served until it closes."""
        serve_connection(sock, self.route, accepting=lambda: not self._drain.draining,
                         on_open=self.connections.add, on_close=self.connections.discard)


def handler_for(state: WorkerState, drain: Drain, config: Config
                ) -> Callable[[socket.socket, Any], None]:
    return GrpcServer(state, drain, config).handle
