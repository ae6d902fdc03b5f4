"""The shared process helpers against real processes and a real HTTP server."""
from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from tests.support.processes import alive
from tests.support.processes import free_port, health_status, reap, wait_healthy
from tests.support.waiting import wait_for


class _Answers(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = HTTPServer(("127.0.0.1", free_port()), _Answers)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/health"
    httpd.shutdown()
    httpd.server_close()


def test_health_status_reads_any_answer_and_none(server):
    assert health_status(server) == 200
    _Answers.status = 503
    try:
        assert health_status(server) == 503
        wait_healthy(server, None, 5.0, any_answer=True)
        with pytest.raises(RuntimeError, match="did not become healthy"):
            wait_healthy(server, None, 0.5, "the log", interval=0.05)
    finally:
        _Answers.status = 200
    assert health_status(f"http://127.0.0.1:{free_port()}/health") is None


def test_wait_healthy_fails_at_once_when_the_server_exited():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    with pytest.raises(RuntimeError, match="exited with 3:\nits log"):
        wait_healthy(f"http://127.0.0.1:{free_port()}/health", proc, 30.0, lambda: "its log")


def test_reap_stops_the_process_and_what_it_started():
    # A parent that ignores SIGTERM, with a child in its session: both must be gone.
    script = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
              "print(child.pid, flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    child = int(proc.stdout.readline())
    reap(proc, grace=0.5)
    proc.stdout.close()
    assert proc.returncode is not None
    # The group's SIGKILL is delivered asynchronously: the child goes, but not necessarily
    # before reap returns (reap waits for the process it started, not for its children).
    assert wait_for(lambda: not alive(child), 10.0)
