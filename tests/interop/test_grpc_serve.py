"""``vllm serve MODEL --grpc-port G`` with greenfront as its frontend: vLLM binds the gRPC socket
and hands it over (``--grpc-listen-fd``); greenfront's workers serve it. On the real CPU engine,
greedy ``Generate``/``GenerateStream`` give the same token ids and text as vLLM's Rust frontend
launched the same way (the two stacks run one after the other: 2 cores)."""
from __future__ import annotations

import os

import pytest
from google.protobuf.json_format import MessageToDict

from rpc.proto import health_pb2 as h, inference_pb2 as pb
from tests.interop.peers import VllmProcess, requires_peers, serve_with_greenfront
from tests.support.grpc_client import Client
from tests.support.processes import free_port
from tests.support.vllm_peers import SERVE_ARGS, rust_frontend_bin

pytestmark = [requires_peers, pytest.mark.skipif(not os.path.exists(rust_frontend_bin()),
                                                 reason="vLLM's Rust frontend not installed")]

OPTIONS = pb.ResponseOptions(output_token_ids=True, prompt_token_ids=True)
REQUESTS = [
    pb.GenerateRequest(text="The capital of France is", response=OPTIONS,
                       stopping=pb.StoppingCriteria(max_new_tokens=8)),
    pb.GenerateRequest(token_ids=pb.TokenIds(ids=[1, 22177, 1044, 1307]), response=OPTIONS,
                       stopping=pb.StoppingCriteria(max_new_tokens=6, stop_strings=["e"])),
]


def _answers(stack: VllmProcess, grpc_port: int) -> list:
    with Client(f"127.0.0.1:{grpc_port}") as client:
        health = client.call("/grpc.health.v1.Health/Check", h.HealthCheckRequest(), timeout=30)
        assert health.status == h.HealthCheckResponse.SERVING
        out = []
        for request in REQUESTS:
            unary = client.call("/vllm.Inference/Generate", request, timeout=120)
            stream = client.call("/vllm.Inference/GenerateStream", request, timeout=120)
            out.append((MessageToDict(unary), _joined([MessageToDict(m) for m in stream])))
        return out


def _joined(stream: list[dict]) -> dict:
    """A stream as one answer: how the engine's tokens are split into messages depends on when
    each step's output reaches the frontend (the simulator's parity test compares messages one
    by one; the real engine's timing is the machine's)."""
    outputs = [m.get("outputs", {}) for m in stream]
    return {"first": stream[0], "token_ids": [t for o in outputs for t in o.get("tokenIds", [])],
            "text": "".join(o.get("text", "") for o in outputs),
            "finish": stream[-1].get("outputs", {}).get("finishInfo")}


def _run(stack: VllmProcess, grpc_port: int) -> list:
    try:
        return _answers(stack.wait_healthy(), grpc_port)
    finally:
        stack.kill()


@pytest.mark.parametrize("workers", [1, 2])
def test_same_answers_as_the_rust_frontend(tmp_path, workers):
    port = free_port()
    ours = _run(serve_with_greenfront(str(tmp_path / "greenfront.log"),
                                      ["--grpc-port", str(port)], workers=workers), port)
    port, http = free_port(), free_port()
    rust = VllmProcess(["--port", str(http), *SERVE_ARGS, "--grpc-port", str(port)],
                       str(tmp_path / "rust.log"), port=http,
                       env={"VLLM_USE_RUST_FRONTEND": "1",
                            "VLLM_RUST_FRONTEND_PATH": rust_frontend_bin()})
    theirs = _run(rust, port)
    assert ours == theirs
    # The real engine generated something (not an empty or refused answer on both sides).
    assert ours[0][0]["outputs"]["numTokens"] == 8
