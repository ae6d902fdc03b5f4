"""A real ``grpcio`` client for greenfront's (and vLLM's) gRPC services, without generated stubs:
each RPC is a channel method with the project's message classes as (de)serializers."""
from __future__ import annotations

from typing import Any

import grpc

from rpc.proto import control_pb2, health_pb2, inference_pb2

#: path -> (request class, response class, server-streaming)
RPCS: dict[str, tuple[Any, Any, bool]] = {
    "/vllm.Inference/Generate": (inference_pb2.GenerateRequest, inference_pb2.GenerateResponse,
                                 False),
    "/vllm.Inference/GenerateStream": (inference_pb2.GenerateRequest,
                                       inference_pb2.GenerateResponse, True),
    "/grpc.health.v1.Health/Check": (health_pb2.HealthCheckRequest,
                                     health_pb2.HealthCheckResponse, False),
    "/grpc.health.v1.Health/Watch": (health_pb2.HealthCheckRequest,
                                     health_pb2.HealthCheckResponse, True),
}
for _method in control_pb2.DESCRIPTOR.services_by_name["Control"].methods:
    RPCS[f"/vllm.Control/{_method.name}"] = (
        getattr(control_pb2, _method.input_type.name),
        getattr(control_pb2, _method.output_type.name), False)


class Client:
    """``client.call("/vllm.Inference/Generate", request, timeout=...)``."""

    def __init__(self, target: str) -> None:
        self.channel = grpc.insecure_channel(target)

    def method(self, path: str, **kw: Any) -> Any:
        request_type, response_type, streaming = RPCS[path]
        make = self.channel.unary_stream if streaming else self.channel.unary_unary
        return make(path, request_serializer=request_type.SerializeToString,
                    response_deserializer=response_type.FromString, **kw)

    def call(self, path: str, request: Any, **kw: Any) -> Any:
        result = self.method(path)(request, **kw)
        return list(result) if RPCS[path][2] else result

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
