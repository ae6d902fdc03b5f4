"""Servers under test: greenfront deployments, vLLM's frontends, any running target; CPU accounting.

Owns ``Endpoint`` (what a scenario talks to: URLs, model name, and which processes are the
frontend and which the engine, for CPU accounting), ``GreenfrontDeployment`` (gunicorn + the
built-in simulator with one configuration), ``VllmPeer`` (vLLM's Python or Rust frontend, as
``interop/setup.sh`` installs them, started against a fresh simulator) and ``external_endpoint``.

Pinning (``os.sched_setaffinity``, what ``taskset -c`` does): the frontend gets ``server_cpus``
(both cores by default: the offload pool exists to use them), the simulator ``client_cpus`` with
the load generator and the prober (core 1 by default), as in the measurements of docs/architecture.md §5.4
(docs/architecture.md §5.4: load generator, prober and engine on one core).

Runs on: the benchmark orchestrator process.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.support.processes import cmdline, free_port, reap, tree, wait_healthy
from tests.support.vllm_peers import PEERS, external_frontend, tiny_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL_DIR = os.path.join(ROOT, "models", "tekken-tiny")
#: The tool-calling scenario's model: the same tokenizer with the parsers' marker tokens.
MARKER_MODEL_DIR = os.path.join(ROOT, "models", "tekken-markers")


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def parse_cpus(spec: str) -> set[int]:
    """``"0-1"`` / ``"1"`` / ``"0,2-3"`` -> a CPU set (``taskset -c`` syntax)."""
    cpus: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


# -- /proc ---------------------------------------------------------------------------------------

def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """utime + stime of each live pid (threads included), from /proc/<pid>/stat."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / _CLK_TCK
        except (OSError, ValueError, IndexError):
            continue
    return out


def socket_counts(pids: list[int]) -> dict[int, int]:
    """Open sockets per process (with several workers: how the connections were spread)."""
    out = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        n = 0
        for fd in fds:
            try:
                n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
            except OSError:
                pass
        out[pid] = n
    return out


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs spent busy since boot (/proc/stat): minus what the benchmark's own
    processes used, it is what something else on the machine took during a phase."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / _CLK_TCK


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two snapshots (processes born in between count whole)."""
    return sum(v - before.get(pid, 0.0) for pid, v in after.items())


# -- endpoints -----------------------------------------------------------------------------------

@dataclass
class Endpoint:
    """What a scenario runs against."""

    label: str
    url: str
    health_url: str
    model: str = "tiny"
    server_pids: Callable[[], list[int]] = list
    engine_pids: Callable[[], list[int]] = list
    settings: dict = field(default_factory=dict)
    #: vLLM's gRPC services (``vllm.Inference``) on the same host, when the server has them on
    grpc_port: int | None = None

    @property
    def host_port(self) -> tuple[str, int]:
        rest = self.url.split("://", 1)[-1].split("/", 1)[0]
        host, _, port = rest.partition(":")
        return host, int(port or 80)


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, resp.read()


def first_model(url: str) -> str:
    """The first served model name of an OpenAI-compatible server."""
    import json
    return json.loads(_get(url.rstrip("/") + "/v1/models")[1])["data"][0]["id"]


def external_endpoint(label: str, url: str, health_url: str | None, pid: int | None) -> Endpoint:
    """A server someone else started; with ``pid`` its process tree's CPU is reported."""
    health = health_url or url.rstrip("/") + "/health"
    wait_healthy(health, None, 10.0)

    def engines() -> list[int]:  # a greenfront target's embedded simulator is its engine
        return [p for p in tree(pid) if "engine.sim" in cmdline(p)] if pid else []
    return Endpoint(label, url.rstrip("/"), health, first_model(url),
                    server_pids=(lambda: tree(pid, exclude=set(engines()))) if pid else list,
                    engine_pids=engines, settings={"kind": "external", "pid": pid})


def pinned(cpus: set[int]) -> Callable[[], None]:
    """A ``preexec_fn`` that pins the child (and everything it starts) like ``taskset -c``.

    The orchestrator has no threads, so ``preexec_fn``'s fork-safety caveat does not apply.
    """
    return lambda: os.sched_setaffinity(0, cpus)


class GreenfrontDeployment:
    """gunicorn + simulator with one configuration; a context manager that always stops it."""

    def __init__(self, label: str, *, workers: int = 1, offload: bool = True,
                 backend: str = "fastokens", sim_args: str = "", server_cpus: set[int],
                 client_cpus: set[int], log_dir: str, model_dir: str = DEFAULT_MODEL_DIR,
                 extra_env: dict[str, str] | None = None, reference: bool = False,
                 grpc: bool = False) -> None:
        self.label = label
        self.port = free_port()
        self.grpc_port = free_port() if grpc else None
        self.workers = workers
        self.server_cpus, self.client_cpus = server_cpus, client_cpus
        self.run_dir = tempfile.mkdtemp(prefix="greenfront-bench-")
        self.log_path = os.path.join(log_dir, f"{label}.log")
        # config.py's default pool size (CPUs); the tokenizer limit is compared at this count.
        threads = int((extra_env or {}).get("GREENFRONT_REQUEST_WORKER_THREADS", 0)
                      or os.cpu_count() or 1)
        self.settings = {"kind": "greenfront", "workers": workers, "offload": offload,
                         "backend": backend, "pool_threads": threads, "sim_args": sim_args,
                         "reference": reference}
        self.env = dict(os.environ)
        self.env.update({
            "GREENFRONT_MODEL": model_dir,
            "GREENFRONT_SERVED_MODEL_NAME": "tiny",
            "GREENFRONT_BIND": f"127.0.0.1:{self.port}",
            "GREENFRONT_WORKERS": str(workers),
            "GREENFRONT_RUN_DIR": self.run_dir,
            "GREENFRONT_SIM_ARGS": sim_args,
            "GREENFRONT_OFFLOAD": "1" if offload else "0",
            "GREENFRONT_TOKENIZER_BACKEND": backend,
            "GREENFRONT_LOG_LEVEL": "warning",
        })
        if self.grpc_port:
            self.env["GREENFRONT_GRPC_PORT"] = str(self.grpc_port)
        self.env.update(extra_env or {})
        self.proc: subprocess.Popen | None = None
        self._log = None

    def __enter__(self) -> Endpoint:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "app:api"],
            cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=pinned(self.server_cpus))  # noqa: PLW1509
        url = f"http://127.0.0.1:{self.port}"
        try:
            wait_healthy(url + "/health", self.proc, 60.0, self.log_path, name="greenfront")
            self._wait_workers()
            for pid in self.engine_pids():
                os.sched_setaffinity(pid, self.client_cpus)
        except BaseException:
            self.__exit__()
            raise
        return Endpoint(self.label, url, url + "/health", "tiny", self.server_pids,
                        self.engine_pids, self.settings, grpc_port=self.grpc_port)

    def _wait_workers(self) -> None:
        # /health answers as soon as one worker is up; the others must be too before measuring.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            workers = [p for p in tree(self.proc.pid)[1:] if "gunicorn" in cmdline(p)]
            if len(workers) >= self.workers:
                time.sleep(1.0)  # each worker registers with the engine after it forks
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.workers} workers did not start; log: {self.log_path}")

    def engine_pids(self) -> list[int]:
        assert self.proc is not None
        return [p for p in tree(self.proc.pid) if "engine.sim" in cmdline(p)]

    def server_pids(self) -> list[int]:
        """The gunicorn master, its workers and the handshake helper (not the simulator)."""
        assert self.proc is not None
        return tree(self.proc.pid, exclude=set(self.engine_pids()))

    def __exit__(self, *exc: object) -> None:
        reap(self.proc, term_group=True)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


#: Peer kinds: vLLM's two frontends, and greenfront as the frontend ``vllm serve`` launches.
PEER_KINDS = ("python", "rust", "greenfront")
#: An embedding model's engine, as ``vllm serve`` and the simulator both spell it.
POOLING_ARGS = ["--runner", "pooling", "--convert", "embed"]


class VllmPeer:
    """vLLM's Python or Rust frontend on a fresh simulator; or (kind ``greenfront``) ``vllm
    serve`` launching greenfront with ``workers`` workers, the way it launches its Rust frontend
    (``VLLM_USE_RUST_FRONTEND=1`` with greenfront's executable), so the same supervisor, sockets
    and handshake stand in front of the same simulator. ``pooling``: the model is an embedding
    model and the simulator a pooling engine (``POOLING_ARGS`` on both command lines)."""

    def __init__(self, kind: str, *, sim_args: str, server_cpus: set[int],
                 client_cpus: set[int], log_dir: str, peers: str = PEERS,
                 max_model_len: int = 131072, workers: int | None = None,
                 pooling: bool = False, grpc: bool = False) -> None:
        if kind not in PEER_KINDS:
            raise ValueError(f"kind must be one of {', '.join(PEER_KINDS)}")
        self.kind = kind
        self.label = f"vllm-{kind}"
        self.port, self.rpc_port = free_port(), free_port()
        self.sim_args = sim_args
        self.server_cpus, self.client_cpus = server_cpus, client_cpus
        self.log_dir = log_dir
        # The tiny model says 4096 positions; the frontend only needs to accept long prompts.
        self.argv, env = external_frontend(
            "supervised" if kind == "greenfront" else kind, self.port, self.rpc_port,
            model=tiny_model(peers), max_model_len=max_model_len, peers=peers,
            frontend_bin=os.path.join(ROOT, "bin", "greenfront") if kind == "greenfront" else "")
        if pooling:  # an embedding model (bench.embed_load), on a pooling simulator
            self.argv += POOLING_ARGS
            self.sim_args = f"{sim_args} {' '.join(POOLING_ARGS)}"
        if not (os.path.exists(self.argv[0]) and os.path.isdir(tiny_model(peers))):
            raise RuntimeError(f"vLLM peers not installed ({self.argv[0]}): "
                               f"PEERS={peers} make interop-setup")
        self.env = dict(os.environ, **env)
        # vLLM's Rust frontend serves vllm.Inference beside HTTP on --grpc-port.
        self.grpc_port = free_port() if grpc and kind == "rust" else None
        if self.grpc_port:
            self.argv += ["--grpc-port", str(self.grpc_port)]
        self.workers = workers
        if kind == "greenfront":
            self.label = "greenfront-vllm-serve" + (f"-{workers}w" if workers else "")
            self.env.pop("GREENFRONT_WORKERS", None)
            if workers:
                self.env["GREENFRONT_WORKERS"] = str(workers)
        if pooling:
            self.label += " pooling"
        self.frontend: subprocess.Popen | None = None
        self.engine: subprocess.Popen | None = None

    def __enter__(self) -> Endpoint:
        log = os.path.join(self.log_dir, f"{self.label}.log")
        self.frontend = subprocess.Popen(
            self.argv, env=self.env,
            stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=pinned(self.server_cpus))  # noqa: PLW1509
        try:
            time.sleep(3)  # let the frontend bind its handshake socket first (tidier logs)
            self.engine = subprocess.Popen(
                [sys.executable, "-m", "engine.sim", "--handshake",
                 f"tcp://127.0.0.1:{self.rpc_port}", *shlex.split(self.sim_args)],
                cwd=ROOT, stdout=open(os.path.join(self.log_dir, f"{self.label}-sim.log"), "wb"),
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=pinned(self.client_cpus))  # noqa: PLW1509
            url = f"http://127.0.0.1:{self.port}"
            wait_healthy(url + "/health", self.frontend, 300.0, log)
        except BaseException:
            self.__exit__()
            raise
        frontend_pid, engine_pid = self.frontend.pid, self.engine.pid
        settings = {"kind": self.label, "sim_args": self.sim_args}
        if self.kind == "greenfront":
            settings["workers"] = self.workers or "default"
        return Endpoint(self.label, url, url + "/health", "tiny",
                        lambda: tree(frontend_pid), lambda: tree(engine_pid), settings,
                        grpc_port=self.grpc_port)

    def __exit__(self, *exc: object) -> None:
        reap(self.frontend, grace=20.0, term_group=True)
        reap(self.engine, term_group=True)
        self.frontend = self.engine = None
