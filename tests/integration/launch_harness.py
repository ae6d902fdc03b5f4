"""Plays ``vllm serve``'s part for the launched frontend: binds the sockets, starts engines and
``bin/greenfront frontend …`` with the inherited fds, exactly as docs/engine-protocol.md §6 says.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile

from tests.support.processes import reap, wait_healthy
from tests.integration.harness import ROOT

EXECUTABLE = os.path.join(ROOT, "bin", "greenfront")


def unix_listener(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(128)
    return sock


class LaunchedFrontend:
    """Sockets + simulator engines + the frontend process, all stopped by ``stop``."""

    def __init__(self, model_dir: str, *, engines: int = 1, args: dict | None = None,
                 sim_args: list[str] | None = None, coordinator: str | None = None,
                 start_engines: bool = True, env: dict | None = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="gf-launch-")
        self.http = socket.socket()
        self.http.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.http.bind(("127.0.0.1", 0))  # bound, not listening: the frontend listens
        self.port = self.http.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.input_path = os.path.join(self.dir, "in.sock")
        self.output_path = os.path.join(self.dir, "out.sock")
        self.inp = unix_listener(self.input_path)
        self.out = unix_listener(self.output_path)
        payload = {"model_tag": model_dir, "served_model_name": ["tiny"],
                   "engine_ready_timeout_secs": 60, "http_timeout_keep_alive": 5}
        payload.update(args or {})
        cmd = [EXECUTABLE, "frontend", "--listen-fd", str(self.http.fileno()),
               "--input-listener-fd", str(self.inp.fileno()),
               "--output-listener-fd", str(self.out.fileno()),
               "--engine-start-index", "0", "--engine-count", str(engines),
               "--data-parallel-size", str(engines)]
        if coordinator:
            cmd += ["--coordinator-address", coordinator]
        cmd += ["--args-json", json.dumps(payload, sort_keys=True)]
        self.log_path = os.path.join(self.dir, "frontend.log")
        self._log = open(self.log_path, "wb")
        fds = [self.http.fileno(), self.inp.fileno(), self.out.fileno()]
        for fd in fds:
            os.set_inheritable(fd, True)
        self.proc = subprocess.Popen(cmd, pass_fds=fds, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     env=dict(os.environ, **(env or {})))
        # Like vllm serve: the supervisor closes its copies once the frontend has them.
        for sock in (self.http, self.inp, self.out):
            sock.close()
        self.engines: list[subprocess.Popen] = []
        if start_engines:
            for rank in range(engines):
                self.engines.append(subprocess.Popen(
                    [sys.executable, "-m", "engine.sim", "--rank", str(rank),
                     "--input", f"ipc://{self.input_path}", "--output", f"ipc://{self.output_path}",
                     "--data-parallel-size", str(engines), "--verbose"] + (sim_args or []),
                    cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT,
                    start_new_session=True))

    def wait_healthy(self, timeout: float = 60.0) -> "LaunchedFrontend":
        wait_healthy(self.url + "/health", self.proc, timeout, self.log, name="frontend",
                     interval=0.1)
        return self

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-20000:]

    def stop(self) -> None:
        for proc in [self.proc] + self.engines:
            reap(proc, grace=0)
        self._log.close()
