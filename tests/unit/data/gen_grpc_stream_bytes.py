"""Generates tests/unit/data/grpc_stream_bytes.json: what a real greenfront sent on one HTTP/2
connection to ``bench.grpc_client`` for four ``GenerateStream`` calls (8 tokens each, the
simulator in echo mode), one hex string per ``recv``. Run from the repository's root:

    GREENFRONT_TEST_MODEL_DIR=$PWD/models/tekken-tiny .venv/bin/python tests/unit/data/gen_grpc_stream_bytes.py
"""
from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.getcwd())

from bench import grpc_client as gc  # noqa: E402
from bench.client import Loop  # noqa: E402
from rpc.proto import inference_pb2 as pb  # noqa: E402
from tests.integration.harness import GreenfrontServer  # noqa: E402
from tests.support.processes import free_port  # noqa: E402

STREAMS, TOKENS = 4, 8
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grpc_stream_bytes.json")


def request(i: int) -> bytes:
    return gc.grpc_message(pb.GenerateRequest(
        model="tiny", token_ids=pb.TokenIds(ids=[1, 22177, 1044 + i]),
        stopping=pb.StoppingCriteria(max_new_tokens=TOKENS, ignore_eos=True)).SerializeToString())


def main() -> None:
    reads: list[bytes] = []
    feed = gc.H2Connection.feed

    def recording(self, data, t):
        reads.append(bytes(data))
        return feed(self, data, t)
    gc.H2Connection.feed = recording
    ended: list[int] = []

    class Done(gc.Call):
        def on_end(self, status, message, t):
            ended.append(status)

    port = free_port()
    with GreenfrontServer(os.environ["GREENFRONT_TEST_MODEL_DIR"],
                          sim_args="--output-mode echo --ttft-ms 5 --itl-ms 2",
                          env={"GREENFRONT_GRPC_PORT": str(port)}):
        loop = Loop()
        conn = gc.H2Connection(loop, "127.0.0.1", port, gc.request_headers(
            f"127.0.0.1:{port}", "/vllm.Inference/GenerateStream"))
        for i in range(STREAMS):
            conn.start(request(i), Done())
        deadline = time.monotonic() + 20
        while len(ended) < STREAMS and time.monotonic() < deadline:
            loop.run(time.monotonic() + 0.05)
        loop.close()
    assert ended == [0] * STREAMS, ended
    with open(OUT, "w") as f:
        json.dump({"streams": STREAMS, "max_new_tokens": TOKENS,
                   "reads": [r.hex() for r in reads]}, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
