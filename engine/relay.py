"""The frame relay: several gunicorn workers behind the one engine client ``vllm serve`` expects.

``vllm serve`` hands its frontend one input and one output listener; the engines connect one
DEALER and one PUSH to them and send every output to output socket 0. With N workers, this
process (started by the gunicorn master before it forks, ``gunicorn.conf.py``; with one worker
too, then forwarding every frame unchanged) owns the two
inherited listeners and plays the engines' part toward each worker: per worker slot it connects
a DEALER per engine rank (with that rank's 2-byte identity) to the worker's input ROUTER and a
PUSH to its output PULL, exactly the sockets a standalone worker gives engines. So a worker is a
full engine client and runs the same code as standalone (registration, outputs, utility calls,
ENGINE_CORE_DEAD, a dropped connection, DP coordinator on its own XSUB).

What moves, and how:
- worker → engine (ADD / ABORT / UTILITY): the frames as received, forwarded zero-copy to the
  engine's identity (the DEALER a frame arrived on names the rank).
- engine → worker (outputs): split by bytes (``engine.protocol.split``: the slot is in each
  request id's last two hex digits and in each utility call id); a message all for one worker is forwarded as
  is. Multi-frame messages (aux buffers of large logprobs) go unchanged to every worker, which
  drops outputs of requests it does not know. ``ENGINE_CORE_DEAD`` goes to every worker.
- registrations: each engine's ready message is passed to every worker (queued for a worker
  that has not bound yet; a restarted worker reads the shared copy in the run dir).
- an engine's connection dropping (after every engine registered, fewer live connections than
  engines) closes the DEALERs toward the workers, which see their engine connection drop and
  fail as they would standalone (503, and exit unless VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1).

Runs on: its own process, one thread: ``python -m engine.relay --input-fd N --output-fd M
--worker-input ADDR --worker-output ADDR … --engine-start S --engine-count C``.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys

import msgspec
import zmq
from zmq.utils.monitor import parse_monitor_message

from engine.protocol import codec
from engine.protocol.split import MAX_WORKERS, split_outputs
from engine.transport import endpoint_for_fd

log = logging.getLogger("greenfront.relay")


def _socket(ctx: zmq.Context, kind: int) -> zmq.Socket:
    sock = ctx.socket(kind)
    # NOTE: docs/engine-protocol.md §1.2: unbounded queues, as vLLM's own sockets.
    sock.setsockopt(zmq.SNDHWM, 0)
    sock.setsockopt(zmq.RCVHWM, 0)
    sock.setsockopt(zmq.LINGER, 0)
    return sock


class Relay:
    """The engine-facing ROUTER/PULL and, per worker slot, DEALERs (one per rank) and a PUSH."""

    def __init__(self, *, input_fd: int, output_fd: int, worker_inputs: list[str],
                 worker_outputs: list[str], ranks: list[int]) -> None:
        self.ctx = zmq.Context(io_threads=1)
        self.ranks = ranks
        self.workers = len(worker_inputs)
        self.engines = _socket(self.ctx, zmq.ROUTER)
        self.engines.setsockopt(zmq.USE_FD, input_fd)
        self.engines.bind(endpoint_for_fd(input_fd))
        self.outputs = _socket(self.ctx, zmq.PULL)
        self.outputs.setsockopt(zmq.USE_FD, output_fd)
        self.outputs.bind(endpoint_for_fd(output_fd))
        self.monitor = self.engines.get_monitor_socket(zmq.EVENT_ACCEPTED
                                                       | zmq.EVENT_DISCONNECTED)
        self.connections = 0
        self.pushes = []
        for address in worker_outputs:
            push = _socket(self.ctx, zmq.PUSH)
            push.connect(address)
            self.pushes.append(push)
        # (slot, rank) → DEALER, and back: which rank a worker's request is for.
        self.dealers: dict[tuple[int, int], zmq.Socket] = {}
        self.rank_of: dict[zmq.Socket, bytes] = {}
        for slot, address in enumerate(worker_inputs):
            for rank in ranks:
                dealer = _socket(self.ctx, zmq.DEALER)
                identity = rank.to_bytes(2, "little")
                dealer.setsockopt(zmq.IDENTITY, identity)
                dealer.connect(address)
                self.dealers[(slot, rank)] = dealer
                self.rank_of[dealer] = identity
        self.registered: set[int] = set()
        self.poller = zmq.Poller()
        for sock in [self.outputs, self.engines, self.monitor, *self.dealers.values()]:
            self.poller.register(sock, zmq.POLLIN)

    def run(self) -> None:
        handlers = {self.outputs: self._on_outputs, self.engines: self._on_registration,
                    self.monitor: self._on_monitor}
        while True:
            for sock, _ in self.poller.poll():
                if not sock.closed:  # a DEALER closed by an earlier handler of this round
                    _drain(sock, handlers.get(sock, self._on_request))

    # -- engine → workers --------------------------------------------------------------------
    def _on_outputs(self, sock: zmq.Socket) -> None:
        frames = sock.recv_multipart(copy=False, flags=zmq.NOBLOCK)
        if self.workers == 1 or len(frames) > 1 or codec.is_engine_dead([frames[0].buffer]):
            for push in self.pushes:
                push.send_multipart(frames, copy=False)
            return
        try:
            parts = split_outputs(frames[0].buffer, self.workers)
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.exception("undecodable engine output dropped")
            return
        for slot, part in parts.items():
            self.pushes[slot].send(frames[0] if part is None else part, copy=False)

    def _on_registration(self, sock: zmq.Socket) -> None:
        frames = sock.recv_multipart(flags=zmq.NOBLOCK)
        if len(frames) < 2:
            return
        rank = int.from_bytes(frames[0], "little")
        if rank not in self.ranks:
            log.warning("ignoring a message from unexpected engine identity %r", frames[0])
            return
        self.registered.add(rank)
        log.info("engine %d registered; passing it to %d worker(s)", rank, self.workers)
        for slot in range(self.workers):
            dealer = self.dealers.get((slot, rank))
            if dealer is not None:
                dealer.send(frames[1])

    def _on_monitor(self, sock: zmq.Socket) -> None:
        # Engine death is fewer live connections than engines once all registered: a
        # connection an engine gave up on while nobody accepted (its handshake timed out in the
        # listen backlog) is accepted and dropped at once, and must not count as a death.
        event = parse_monitor_message(sock.recv_multipart(flags=zmq.NOBLOCK))
        if event["event"] == zmq.EVENT_ACCEPTED:
            self.connections += 1
            return
        self.connections -= 1
        if not self.registered.issuperset(self.ranks) or self.connections >= len(self.ranks):
            log.warning("an engine connection dropped (%d live for %d engines)",
                        self.connections, len(self.ranks))
            return
        log.error("an engine's connection dropped; disconnecting the workers from it")
        for dealer in self.dealers.values():
            self.poller.unregister(dealer)
            dealer.close(linger=0)
        self.dealers.clear()

    # -- workers → engine --------------------------------------------------------------------
    def _on_request(self, sock: zmq.Socket) -> None:
        frames = sock.recv_multipart(copy=False, flags=zmq.NOBLOCK)
        try:
            self.engines.send_multipart([self.rank_of[sock], *frames], copy=False)
        except zmq.ZMQError as exc:
            log.error("could not pass a request to engine %d: %s",
                      int.from_bytes(self.rank_of[sock], "little"), exc)


#: Messages handled per socket before the poller looks at the others again, so a burst of
#: outputs does not hold back the workers' requests (new requests reach the engines promptly).
_BURST = 64


def _drain(sock: zmq.Socket, handler) -> None:
    for _ in range(_BURST):
        try:
            handler(sock)
        except zmq.Again:
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input-fd", type=int, required=True, help="inherited input listener")
    parser.add_argument("--output-fd", type=int, required=True, help="inherited output listener")
    parser.add_argument("--worker-input", action="append", required=True,
                        help="a worker slot's input ROUTER address (one per slot, in order)")
    parser.add_argument("--worker-output", action="append", required=True,
                        help="a worker slot's output PULL address")
    parser.add_argument("--engine-start", type=int, default=0)
    parser.add_argument("--engine-count", type=int, default=1)
    args = parser.parse_args(argv)
    if len(args.worker_input) != len(args.worker_output):
        parser.error("give as many --worker-output as --worker-input")
    if len(args.worker_input) > MAX_WORKERS:
        parser.error(f"at most {MAX_WORKERS} workers (request ids carry the slot in 2 hex digits)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [relay] %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    relay = Relay(input_fd=args.input_fd, output_fd=args.output_fd,
                  worker_inputs=args.worker_input, worker_outputs=args.worker_output,
                  ranks=list(range(args.engine_start, args.engine_start + args.engine_count)))
    log.info("relaying %d engine(s) to %d worker(s)", len(relay.ranks), relay.workers)
    try:
        relay.run()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
