"""Server processes for the benchmark and the tests: a free port, waiting for health, reaping.

One set of helpers, used by ``bench.deploy`` and by the test harnesses (``tests/integration``,
``tests/interop``). Every server is started in its own session (``start_new_session=True``), so
that reaping its process group also reaps whatever it started (workers, simulators, engines).

Runs on: the benchmark orchestrator or the test process.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health_status(url: str, timeout: float = 2.0) -> int | None:
    """The HTTP status ``url`` answers with, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout: float,
                 log: Callable[[], str] | str = "", *, name: str = "server",
                 any_answer: bool = False, interval: float = 0.2) -> None:
    """Poll the health ``url`` until it answers 200 (or anything, with ``any_answer``).

    Raises:
        RuntimeError: ``proc`` exited, or ``timeout`` passed; the message ends with the log
            (``log()`` when it is callable).
    """
    def text() -> str:
        return log() if callable(log) else log

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{text()}")
        status = health_status(url, timeout=max(1.0, interval * 4))
        if status == 200 or (any_answer and status is not None):
            return
        time.sleep(interval)
    raise RuntimeError(f"{name} did not become healthy at {url} in {timeout:.0f} s:\n{text()}")


def reap(proc: subprocess.Popen | None, *, grace: float = 10.0, term_group: bool = False) -> None:
    """Stop a server started in its own session: SIGTERM (to the process, or its whole group
    with ``term_group``), up to ``grace`` seconds for it to exit, then SIGKILL to whatever is
    left in its group. ``grace=0`` kills at once."""
    if proc is None:
        return
    if grace > 0 and proc.poll() is None:
        try:
            if term_group:
                os.killpg(proc.pid, signal.SIGTERM)
            else:
                proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # anything left in the group
    except ProcessLookupError:
        pass
    proc.wait()
