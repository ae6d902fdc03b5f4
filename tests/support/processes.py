"""Server processes for the tests and the benchmark: a free port, waiting for health, reaping,
the process tree from /proc.

One set of helpers, used by the test harnesses (``tests/integration``, ``tests/interop``) and by
``bench.deploy``. Every server is started in its own session (``start_new_session=True``), so
that reaping its process group also reaps whatever it started (workers, simulators, engines).

Runs on: the benchmark orchestrator or the test process.
"""
from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable


def free_port_block(count: int) -> int:
    """The first of ``count`` consecutive TCP ports on 127.0.0.1 that nothing holds now.

    Drawn below Linux's ephemeral range (32768-60999 by default): a port from that range (what
    binding port 0 gives) can be taken before its server binds it, by any outgoing connection's
    source port, and even by a ZMQ peer that keeps connecting to it: a TCP connect to a port on
    the same address with nothing listening can open onto itself. ``make interop`` saw vLLM's
    frontend fail with "Address already in use" on its RPC port, which the simulator was
    already dialling.
    """
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000 - count)
        held = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing holds now (see ``free_port_block``)."""
    return free_port_block(1)


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


def process_children() -> dict[int, list[int]]:
    """Parent pid -> child pids of every process."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    return kids


def tree(pid: int, exclude: set[int] = frozenset()) -> list[int]:
    """``pid`` and its descendants, minus ``exclude`` and their descendants."""
    kids = process_children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p in exclude:
            continue
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
