"""``grpc.health.v1.Health``: ``""``, ``vllm.Inference`` and ``vllm.Control`` are SERVING while
the engines serve and NOT_SERVING when ``/health`` would answer 503 (dead, not registered, every
engine stalled, or stalled past the liveness timeout) or the worker drains; any other service is
NOT_FOUND, as gRPC's standard health servers answer. ``Watch`` sends the status, then each
change (checked once a second) until the client leaves.

Runs on: the HTTP hub.
"""
from __future__ import annotations

from typing import Callable, Iterator

import gevent

from base.errors import ApiError
from rpc.call import Call
from rpc.dispatch import Method
from rpc.proto import health_pb2 as pb
from rpc.status import Code, RpcError
from runtime.state import WorkerState

SERVICES = ("", "vllm.Inference", "vllm.Control")
_WATCH_INTERVAL = 1.0


class HealthService:
    def __init__(self, state: WorkerState, draining: Callable[[], bool]) -> None:
        self._state = state
        self._draining = draining

    def methods(self) -> dict[str, Method]:
        return {"/grpc.health.v1.Health/Check": Method(pb.HealthCheckRequest, self.check),
                "/grpc.health.v1.Health/Watch": Method(pb.HealthCheckRequest, self.watch,
                                                       streaming=True)}

    def status(self) -> int:
        """SERVING or NOT_SERVING, by the rules ``/health`` answers with."""
        state = self._state
        client = state.client
        if client is None or self._draining():
            return pb.HealthCheckResponse.NOT_SERVING
        try:
            client.check_available()
        except ApiError:
            return pb.HealthCheckResponse.NOT_SERVING
        timeout = state.config.engine_stall_liveness_timeout
        if client.stalled_ranks and timeout and client.stalled_for() >= timeout:
            return pb.HealthCheckResponse.NOT_SERVING
        return pb.HealthCheckResponse.SERVING

    def check(self, call: Call, request: pb.HealthCheckRequest) -> pb.HealthCheckResponse:
        _known(request.service)
        return pb.HealthCheckResponse(status=self.status())

    def watch(self, call: Call, request: pb.HealthCheckRequest
              ) -> Iterator[pb.HealthCheckResponse]:
        _known(request.service)
        last = None
        while not call.cancel.cancelled:
            status = self.status()
            if status != last:
                last = status
                yield pb.HealthCheckResponse(status=status)
            gevent.sleep(_WATCH_INTERVAL)


def _known(service: str) -> None:
    if service not in SERVICES:
        raise RpcError(Code.NOT_FOUND, "service not registered")
