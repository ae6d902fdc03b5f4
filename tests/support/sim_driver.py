"""A simulator subprocess (``engine.sim``) driven over real ZMQ sockets that the test binds.

The test plays the frontend (``vllm serve``'s side): ``Sim`` binds a ROUTER (inputs) and PULL(s)
(outputs) on unique ipc paths, or a handshake ROUTER, starts the simulator against them and talks
the wire protocol through engine.protocol. The fixtures (``workdir``, ``start``, ``shared``) are
imported by the test modules that use them; every subprocess is killed in a finalizer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import zmq

from engine.protocol import (
    EngineCoreOutput,
    EngineCoreOutputs,
    EngineCoreRequest,
    LoRARequest,
    SamplingParams,
    SchedulerStats,
    decode_outputs,
    decode_registration,
    encode_abort,
    encode_add,
    encode_utility,
)

ROOT = Path(__file__).resolve().parents[2]
EOS = 2
PROMPT = [1, 501, 502, 503]  # BOS + three tokens: echo mode emits 501, 502, 503, 501, ...
FAST = ["--itl-ms", "4", "--ttft-ms", "4", "--output-mode", "echo"]
STATS_KEYS = list(SchedulerStats.__struct_fields__)


class Sim:
    """One simulator subprocess plus the frontend-side sockets of the test."""

    def __init__(self, workdir: str, args: list[str], outputs: int = 1, handshake: bool = False) -> None:
        self.ctx = zmq.Context()
        self.workdir = workdir
        self.log_path = os.path.join(workdir, "sim.log")
        self.router = self._bind(zmq.ROUTER, "in")
        self.pulls = [self._bind(zmq.PULL, f"out{i}") for i in range(outputs)]
        self.input_addr = f"ipc://{workdir}/in"
        self.output_addrs = [f"ipc://{workdir}/out{i}" for i in range(outputs)]
        if handshake:
            self.hs = self._bind(zmq.ROUTER, "hs")
            cmd = ["--handshake", f"ipc://{workdir}/hs"]
        else:
            self.hs = None
            cmd = ["--input", self.input_addr]
            for addr in self.output_addrs:
                cmd += ["--output", addr]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "engine.sim", *cmd, *args], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
            )
        self.identity: bytes | None = None
        self.registration: Any = None
        self._call_id = 100

    def _bind(self, kind: int, name: str) -> zmq.Socket:
        sock = self.ctx.socket(kind)
        # Before bind: libzmq copies socket options into the listener at bind time.
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.LINGER, 0)
        sock.bind(f"ipc://{self.workdir}/{name}")
        return sock

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait_registration(self, timeout: float = 10.0) -> Any:
        if not self.router.poll(int(timeout * 1000)):
            raise AssertionError("no registration from the simulator:\n" + self.log())
        self.identity, payload = self.router.recv_multipart()
        self.registration = decode_registration(payload)
        return self.registration

    def add(self, rid: str, prompt: list[int] = PROMPT, client_index: int = 0, lora: LoRARequest | None = None,
            **sp: Any) -> None:
        sp.setdefault("temperature", 0.0)
        sp.setdefault("max_tokens", 5)
        req = EngineCoreRequest(rid, prompt, None, SamplingParams(**sp), None, time.time(), lora, None, None,
                                client_index=client_index, external_req_id=rid)
        self.router.send_multipart(encode_add(self.identity, req))

    def abort(self, *rids: str) -> None:
        self.router.send_multipart(encode_abort(self.identity, list(rids)))

    def call(self, method: str, *args: Any, timeout: float = 3.0) -> Any:
        """UTILITY call; returns the UtilityOutput (skipping step messages in between)."""
        self._call_id += 1
        call_id = self._call_id
        self.router.send_multipart(encode_utility(self.identity, 0, call_id, method, args))
        deadline = time.monotonic() + timeout
        self.skipped: list[EngineCoreOutputs] = []
        while True:
            msg = self.recv(max(0.0, deadline - time.monotonic()))
            if msg is None:
                return None
            if msg[1].utility_output is not None and msg[1].utility_output.call_id == call_id:
                return msg[1].utility_output
            self.skipped.append(msg[1])

    def recv(self, timeout: float = 3.0, client: int = 0) -> tuple[list[bytes], EngineCoreOutputs | None] | None:
        sock = self.pulls[client]
        if not sock.poll(int(timeout * 1000)):
            return None
        frames = sock.recv_multipart()
        return frames, decode_outputs(frames)

    def collect(self, rid: str, timeout: float = 5.0, client: int = 0) -> list[tuple[EngineCoreOutput, list[bytes], EngineCoreOutputs]]:
        """All outputs of ``rid`` until it finishes."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self.recv(max(0.0, deadline - time.monotonic()), client)
            if msg is None:
                raise AssertionError(f"{rid} did not finish; got {[o.new_token_ids for o, _, _ in got]}\n" + self.log())
            frames, outs = msg
            assert outs is not None, "unexpected ENGINE_CORE_DEAD"
            for out in outs.outputs:
                if out.request_id == rid:
                    got.append((out, frames, outs))
                    if out.finish_reason is not None:
                        return got

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.ctx.destroy(linger=0)


@pytest.fixture
def workdir() -> Iterator[str]:
    # Short paths: ipc endpoints must fit in sun_path (~107 bytes).
    path = tempfile.mkdtemp(prefix="gfsim-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def start(workdir: str) -> Iterator[Any]:
    sims: list[Sim] = []

    def _start(*args: str, outputs: int = 1, handshake: bool = False, register: bool = True) -> Sim:
        sub = os.path.join(workdir, str(len(sims)))
        os.mkdir(sub)
        sim = Sim(sub, list(args), outputs, handshake)
        sims.append(sim)
        if register and not handshake:
            sim.wait_registration()
        return sim

    yield _start
    for sim in sims:
        sim.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """One default-ish simulator reused by the read-only behaviour tests."""
    path = tempfile.mkdtemp(prefix="gfsim-", dir="/tmp")
    sim = Sim(path, FAST)
    try:
        sim.wait_registration()
        yield sim
    finally:
        sim.close()
        shutil.rmtree(path, ignore_errors=True)


def tokens_of(outs: list) -> list[int]:
    """The new token ids of ``collect``'s outputs, in order."""
    return [t for out, _, _ in outs for t in out.new_token_ids]
