"""The gRPC listener's settings (a mixin of ``base.config.Config``; docs/grpc.md §1).

Runs on: import time, wherever ``config`` is imported.
"""
from __future__ import annotations

from dataclasses import dataclass

from base.settings import non_negative_int, positive_int, setting


@dataclass(frozen=True)
class GrpcSettings:
    """Where gRPC is served: a port on the HTTP bind's host, or a socket `vllm serve` bound."""

    grpc_port: int | None = setting(
        ("GREENFRONT_GRPC_PORT",), positive_int, None,
        "serve vLLM's gRPC services (`vllm.Inference`, `vllm.Control`, health) on this port of "
        "the HTTP bind's host (`--grpc-port`)", shown="off")
    grpc_listen_fd: int | None = setting(
        ("GREENFRONT_GRPC_LISTEN_FD",), non_negative_int, None,
        "an inherited, bound gRPC socket to listen on (set by `bin/greenfront frontend` from "
        "`vllm serve`'s `--grpc-listen-fd`)", shown="none")
