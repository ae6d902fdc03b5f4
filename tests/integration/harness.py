"""Real processes for integration tests: gunicorn + the engine simulator on free ports.

``GreenfrontServer`` starts ``gunicorn -c gunicorn.conf.py app:api`` exactly as a user does, with
settings passed through the environment, waits for /health, and always stops the whole process
group on teardown.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator

from tests.support.processes import cmdline, process_children
from tests.support.processes import free_port, reap
from tests.support.processes import wait_healthy as wait_until_healthy
from tests.support.waiting import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Deployments being stopped behind the tests (``GreenfrontServer.stop_later``); owned by the
#: test process's main thread, which joins them all with ``wait_stopped``.
_stopping: list[threading.Thread] = []


def children_of(pid: int) -> list[tuple[int, str]]:
    """(pid, cmdline) of the direct children of ``pid``."""
    return [(child, cmdline(child)) for child in process_children().get(pid, [])]


class GreenfrontServer:
    """One greenfront deployment (gunicorn master, workers, handshake server, simulator)."""

    def __init__(self, model_dir: str, *, workers: int = 1, sim_args: str = "",
                 env: dict[str, str] | None = None, served_name: str = "tiny") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.run_dir = tempfile.mkdtemp(prefix="greenfront-test-")
        # Beside the run dir, not in it: the server removes its run dir when it exits, and a
        # failed start's message must still show the log.
        self.log_path = self.run_dir + ".log"
        self.env = dict(os.environ)
        self.env.update({
            "GREENFRONT_MODEL": model_dir,
            "GREENFRONT_SERVED_MODEL_NAME": served_name,
            "GREENFRONT_BIND": f"127.0.0.1:{self.port}",
            "GREENFRONT_WORKERS": str(workers),
            "GREENFRONT_RUN_DIR": self.run_dir,
            "GREENFRONT_SIM_ARGS": sim_args,
            "GREENFRONT_REQUEST_WORKER_THREADS": "2",
        })
        self.env.update(env or {})
        self.proc: subprocess.Popen | None = None
        self._stopping = False

    def start(self, timeout: float = 60.0, wait_healthy: bool = True) -> "GreenfrontServer":
        """Start gunicorn and wait for /health: for a 200, or for any answer."""
        return self.launch().wait_started(timeout, wait_healthy)

    def wait_started(self, timeout: float = 60.0, wait_healthy: bool = True) -> "GreenfrontServer":
        """After ``launch``: wait for /health (a 200, or any answer); stopped if it fails."""
        try:
            wait_until_healthy(self.url + "/health", self.proc, timeout, self.log,
                               name="greenfront", any_answer=not wait_healthy, interval=0.1)
            # The answer must come from our master, not from a process that held the port first.
            if not wait_for(lambda: f"Listening at: {self.url}" in self.log(), timeout=10):
                raise RuntimeError(f"another process answers on {self.url}:\n{self.log()}")
        except RuntimeError:
            self.stop()
            raise
        return self

    def launch(self) -> "GreenfrontServer":
        """Start gunicorn without waiting for anything."""
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "app:api"],
            cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        return self

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-20000:]
        except OSError:
            return ""

    def engine_pids(self) -> list[int]:
        assert self.proc is not None
        return [pid for pid, cmd in children_of(self.proc.pid) if "engine.sim" in cmd]

    def worker_pids(self) -> list[int]:
        assert self.proc is not None
        return [pid for pid, cmd in children_of(self.proc.pid) if "gunicorn" in cmd]

    def stop(self) -> None:
        if self.proc is None:
            return
        reap(self.proc, grace=10)
        self._log.close()
        self.proc = None
        with contextlib.suppress(OSError):
            os.unlink(self.log_path)

    def stop_later(self) -> None:
        """``stop`` on a thread of its own, for a deployment no test looks at any more: its
        SIGTERM shutdown (about a second: gunicorn's worker loop looks once a second) runs while
        the next test starts. ``wait_stopped`` joins it before the session ends."""
        if self.proc is None or self._stopping:
            return
        self._stopping = True
        thread = threading.Thread(target=self.stop, name=f"stop {self.url}")
        thread.start()
        _stopping.append(thread)

    def __enter__(self) -> "GreenfrontServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def deployment(model_dir: str, **kwargs) -> Iterator[GreenfrontServer]:
    """A started ``GreenfrontServer`` for a fixture, stopped behind the next tests
    (``stop_later``) once the fixture is done with it."""
    with deployments((model_dir, kwargs)) as (srv,):
        yield srv


@contextlib.contextmanager
def deployments(*specs: tuple[str, dict]) -> Iterator[tuple[GreenfrontServer, ...]]:
    """Several deployments, one per ``(model_dir, GreenfrontServer keyword arguments)``, started
    at once (each spends its start loading the tokenizer: on two cores two of them take little
    longer than one), stopped behind the next tests (``stop_later``) once the fixture is done.
    ``wait_healthy=False`` among the arguments waits for any answer instead of a 200."""
    specs = [(model_dir, dict(kwargs)) for model_dir, kwargs in specs]
    healthy = [kwargs.pop("wait_healthy", True) for _, kwargs in specs]
    servers = tuple(GreenfrontServer(model_dir, **kwargs) for model_dir, kwargs in specs)
    try:
        for srv in servers:
            srv.launch()
        for srv, wait_healthy in zip(servers, healthy):
            srv.wait_started(wait_healthy=wait_healthy)
        yield servers
    finally:
        for srv in servers:
            srv.stop_later()


def wait_stopped() -> None:
    """Join every ``stop_later``: no deployment outlives the test session."""
    while _stopping:
        _stopping.pop().join()
