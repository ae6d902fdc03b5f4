"""The frontend's side of the engine start-up handshake (HELLO → INIT → READY), as a process.

In standalone mode greenfront owns the handshake ROUTER, as vLLM's own frontends do when they
launch engines (docs/engine-protocol.md §2): each engine (the built-in simulator, or
``vllm serve --headless`` engines on this or other hosts) connects, says HELLO, gets INIT with the
input/output addresses of every gunicorn worker slot, registers on those sockets, then says
READY. A separate process, started by the gunicorn master, so that the master stays free of ZMQ
(fork safety) and engines can join while workers come and go.

Runs on: its own process: ``python -m engine.handshake_server --bind ADDR --input A --output B …``.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys

import msgspec
import zmq

log = logging.getLogger("greenfront.handshake")


def build_init(inputs: list[str], outputs: list[str]) -> bytes:
    """The INIT map (EngineHandshakeMetadata) an engine needs to connect to every worker."""
    return msgspec.msgpack.encode({
        "addresses": {
            "inputs": inputs,
            "outputs": outputs,
            "coordinator_input": None,
            "coordinator_output": None,
            "frontend_stats_publish_address": None,
        },
        "parallel_config": {},
    })


def serve(bind: str, inputs: list[str], outputs: list[str], ranks: set[int] | None) -> None:
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(bind)
    init = build_init(inputs, outputs)
    log.info("handshake server on %s for %d worker slot(s)", bind, len(inputs))
    while True:
        identity, payload = router.recv_multipart()[:2]
        rank = int.from_bytes(identity, "little")
        try:
            message = msgspec.msgpack.decode(payload)
            status = message.get("status")
        except Exception:
            log.warning("undecodable handshake message from identity %r", identity)
            continue
        if ranks is not None and rank not in ranks:
            log.warning("engine rank %d is not expected here (expected %s)", rank, sorted(ranks))
            continue
        if status == "HELLO":
            log.info("engine %d says HELLO (local=%s headless=%s); sending INIT", rank,
                     message.get("local"), message.get("headless"))
            router.send_multipart([identity, init])
        elif status == "READY":
            log.info("engine %d is READY", rank)
        else:
            log.warning("unexpected handshake status %r from engine %d", status, rank)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True, help="handshake ROUTER address")
    parser.add_argument("--input", action="append", required=True, help="a worker's input address")
    parser.add_argument("--output", action="append", required=True,
                        help="a worker's output address")
    parser.add_argument("--engine-start", type=int, default=0)
    parser.add_argument("--engine-count", type=int, default=0,
                        help="accept only these ranks (0: any)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [handshake] %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ranks = (set(range(args.engine_start, args.engine_start + args.engine_count))
             if args.engine_count else None)
    try:
        serve(args.bind, args.input, args.output, ranks)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
