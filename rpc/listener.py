"""The gRPC listening socket: made once in the gunicorn master, before it forks, so the workers
share it as they share gunicorn's HTTP socket (``runtime.worker.Listener`` serves it in each).

Runs on: the gunicorn master (``gunicorn.conf.py``'s ``on_starting``).
"""
from __future__ import annotations

import dataclasses
import logging
import socket

from base.config import Config

log = logging.getLogger("greenfront.grpc")

#: The master's listening socket (kept open for the workers it forks).
_listener: socket.socket | None = None


def open_listener(config: Config) -> Config:
    """In the master: the listening socket of ``--grpc-port`` (on the HTTP bind's host), or the
    inherited bound socket of ``--grpc-listen-fd`` put into listening; the configuration then
    names its descriptor for the workers. Without either, ``config`` unchanged."""
    global _listener
    if config.grpc_listen_fd is not None:
        sock = socket.socket(fileno=config.grpc_listen_fd)
    elif config.grpc_port:
        bind = "" if config.bind.startswith(("fd://", "unix:")) else config.bind
        host = bind.rsplit(":", 1)[0].strip("[]") if ":" in bind else bind
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host or "0.0.0.0", config.grpc_port))
    else:
        return config
    sock.listen(2048)
    sock.set_inheritable(True)
    _listener = sock
    log.info("serving gRPC on %s", sock.getsockname())
    return dataclasses.replace(config, grpc_listen_fd=sock.fileno())
