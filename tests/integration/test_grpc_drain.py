"""SIGTERM with gRPC calls in flight (``--shutdown-timeout`` 4 s): the connection is told to
open no new calls (GOAWAY), a new call fails UNAVAILABLE, a call that fits the window finishes,
one that does not is aborted UNAVAILABLE, health turns NOT_SERVING, and the server exits 0."""
from __future__ import annotations

import signal
import threading

import grpc

from rpc.proto import health_pb2 as h, inference_pb2 as pb
from tests.integration.harness import wait_for
from tests.support.grpc_client import Client
from tests.support.processes import free_port

STREAM = "/vllm.Inference/GenerateStream"


def _stream(client: Client, tokens: int) -> tuple[threading.Thread, dict]:
    result: dict = {"messages": []}

    def run() -> None:
        try:
            for message in client.method(STREAM)(pb.GenerateRequest(
                    token_ids=pb.TokenIds(ids=[1, 22177]), stopping=pb.StoppingCriteria(
                        max_new_tokens=tokens, ignore_eos=True)), timeout=120):
                result["messages"].append(message)
            result["code"] = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            result["code"] = exc.code()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def test_drain(make_server):
    port = free_port()
    # A token every 100 ms: 20 tokens take ~2 s, 400 take ~40 s.
    srv = make_server(workers=1, sim_args="--itl-ms 100 --output-mode random",
                      env={"GREENFRONT_SHUTDOWN_TIMEOUT": "4", "GREENFRONT_GRPC_PORT": str(port)})
    with Client(f"127.0.0.1:{port}") as client:
        short, short_result = _stream(client, 20)
        long_, long_result = _stream(client, 400)
        assert wait_for(lambda: len(short_result["messages"]) > 1
                        and len(long_result["messages"]) > 1, timeout=20)
        srv.proc.send_signal(signal.SIGTERM)

        def refused() -> bool:
            try:
                client.call("/grpc.health.v1.Health/Check", h.HealthCheckRequest(), timeout=5)
            except grpc.RpcError as exc:
                return exc.code() == grpc.StatusCode.UNAVAILABLE
            return False
        assert wait_for(refused, timeout=10)
        short.join(30)
        long_.join(30)
    assert short_result["code"] == grpc.StatusCode.OK
    finish = short_result["messages"][-1].outputs.finish_info
    assert finish.num_output_tokens == 20 and finish.finish_reason == pb.FinishInfo.LENGTH
    assert long_result["code"] == grpc.StatusCode.UNAVAILABLE
    assert srv.proc.wait(timeout=30) == 0
