"""Real vLLM 0.32 (CPU) processes for the interop tests: ``vllm serve`` in its various shapes.

Uses the venv and tiny model that ``interop/setup.sh`` installs under ``$PEERS`` (default
/tmp/peers). Every process runs in its own session and is killed with its whole group.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import Iterator

import pytest

from tests.support.processes import free_port, reap, tree, wait_healthy
from tests.support.vllm_peers import (PEERS, SERVE_ARGS, VLLM_ENV, external_engine_args,  # noqa: F401
                                      tiny_model, vllm_bin)
from tests.integration.harness import ROOT

VLLM = vllm_bin()
MODEL = tiny_model()
GREENFRONT = os.path.join(ROOT, "bin", "greenfront")

requires_peers = pytest.mark.skipif(
    not (os.path.exists(VLLM) and os.path.exists(os.path.join(MODEL, ".complete"))),
    reason="vLLM peers not installed: run `make interop` (PEERS=/tmp/peers bash interop/setup.sh)")


class VllmProcess:
    """One ``vllm serve`` process tree (and its log)."""

    def __init__(self, args: list[str], log_path: str, *, port: int | None = None,
                 env: dict[str, str] | None = None, model: str = MODEL) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}" if port else ""
        self.log_path = log_path
        self._log = open(log_path, "wb")
        full_env = dict(os.environ, **VLLM_ENV, **(env or {}))
        for name in ("VLLM_USE_RUST_FRONTEND", "VLLM_RUST_FRONTEND_PATH"):
            if env is None or name not in env:
                full_env.pop(name, None)
        self.proc = subprocess.Popen([VLLM, "serve", model] + args, env=full_env,
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait_healthy(self, timeout: float = 300.0) -> "VllmProcess":
        wait_healthy(self.url + "/health", self.proc, timeout, self.log, name="vllm serve",
                     interval=0.5)
        return self

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-15000:]

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM to ``vllm serve`` (what a user's Ctrl-C or Kubernetes does); its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.kill()

    def kill(self) -> None:
        reap(self.proc, grace=0)
        self._log.close()


def serve_with_greenfront(log_path: str, extra: list[str] | None = None,
                          env: dict[str, str] | None = None,
                          workers: int = 1) -> VllmProcess:
    """``vllm serve`` with greenfront as its frontend (VLLM_USE_RUST_FRONTEND=1), running
    ``workers`` gunicorn workers (engine.relay between them and the engines); ``env`` adds
    settings greenfront reads."""
    port = free_port()
    return VllmProcess(["--port", str(port)] + SERVE_ARGS + (extra or []), log_path, port=port,
                       env={"VLLM_USE_RUST_FRONTEND": "1", "VLLM_RUST_FRONTEND_PATH": GREENFRONT,
                            "GREENFRONT_WORKERS": str(workers), **(env or {})})


#: The drop-in tests that matter for several workers run with each of these worker counts.
WORKER_COUNTS = [1, 2]


def serve_with_python_frontend(log_path: str, extra: list[str] | None = None) -> VllmProcess:
    """``vllm serve`` with vLLM's own Python frontend."""
    port = free_port()
    return VllmProcess(["--port", str(port)] + SERVE_ARGS + (extra or []), log_path, port=port)


@contextlib.contextmanager
def vllm_frontend_on_simulator(logs: str, extra: list[str] | None = None,
                               timeout: float = 300.0,
                               sim_args: list[str] | None = None) -> Iterator[VllmProcess]:
    """vLLM's own Python frontend with no local engine (``--data-parallel-size-local 0``): it
    binds the handshake ROUTER and greenfront's simulator joins it as ``vllm serve --headless``
    would (its log: ``logs/sim.log``). Both are killed on exit."""
    port, rpc_port = free_port(), free_port()
    frontend = VllmProcess(["--port", str(port)] + SERVE_ARGS + (extra or [])
                           + external_engine_args(rpc_port),
                           os.path.join(logs, "frontend.log"), port=port)
    engine = subprocess.Popen(
        [sys.executable, "-m", "engine.sim", "--handshake", f"tcp://127.0.0.1:{rpc_port}",
         "--max-model-len", "2048"] + (sim_args or ["--output-mode", "echo"]),
        cwd=ROOT, stdout=open(os.path.join(logs, "sim.log"), "wb"), stderr=subprocess.STDOUT,
        start_new_session=True)
    try:
        yield frontend.wait_healthy(timeout)
    finally:
        frontend.kill()
        reap(engine, grace=0)


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc), for checking that nothing is left behind."""
    return set(tree(pid)) - {pid}



class RustFrontendProcess(VllmProcess):
    """``vllm-rs serve`` run directly (no ``vllm serve`` around it)."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: str, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, env=dict(os.environ, **env), stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)


@contextlib.contextmanager
def rust_frontend_on_simulator(logs: str, extra: list[str] | None = None,
                               sim_args: list[str] | None = None,
                               timeout: float = 120.0) -> Iterator[VllmProcess]:
    """vLLM's Rust frontend with greenfront's simulator joining its handshake as a remote
    engine (its log: ``logs/sim.log``); ``extra`` adds to the frontend's command line (e.g.
    ``--grpc-port``). Both are killed on exit."""
    from tests.support.vllm_peers import external_frontend

    port, rpc_port = free_port(), free_port()
    argv, env = external_frontend("rust", port, rpc_port, model=MODEL)
    frontend = RustFrontendProcess(argv + (extra or []), env,
                                   os.path.join(logs, "rust-frontend.log"), port)
    engine = subprocess.Popen(
        [sys.executable, "-m", "engine.sim", "--handshake", f"tcp://127.0.0.1:{rpc_port}",
         "--max-model-len", "2048"] + (sim_args or ["--output-mode", "echo"]),
        cwd=ROOT, stdout=open(os.path.join(logs, "sim.log"), "wb"), stderr=subprocess.STDOUT,
        start_new_session=True)
    try:
        yield frontend.wait_healthy(timeout)
    finally:
        frontend.kill()
        reap(engine, grace=0)
