"""Regenerates the committed ``*_pb2.py`` message classes from the ``.proto`` files beside it.

    .venv/bin/python -m rpc.proto.generate

Needs ``grpcio-tools`` (a development dependency: serving needs only ``protobuf``).

Runs on: a developer's shell, and ``tests/unit/rpc/test_proto.py`` (into a scratch directory).
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROTOS = ("inference.proto", "control.proto", "health.proto")


def generate(out_dir: str) -> None:
    """Write ``<name>_pb2.py`` for every ``.proto`` into ``out_dir/rpc/proto``."""
    import grpc_tools
    from grpc_tools import protoc

    includes = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = ["protoc", f"-I{ROOT}", f"-I{includes}", f"--python_out={out_dir}"]
    args += [os.path.join("rpc", "proto", name) for name in PROTOS]
    os.makedirs(os.path.join(out_dir, "rpc", "proto"), exist_ok=True)
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")


if __name__ == "__main__":
    generate(ROOT)
    sys.exit(0)
