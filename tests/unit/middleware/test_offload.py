"""middleware/offload.py with falcon.testing and a real request pool: heavy paths run on a pool
thread with their body read in the hub, light paths stay in the hub, oversized bodies get 413,
deferred bodies are resolved before the status goes out, and failures are OpenAI envelopes."""
from __future__ import annotations

import time

import falcon
import falcon.testing
import gevent
import pytest
from gevent import monkey

from middleware import errors as error_handlers
from middleware.offload import OffloadMiddleware, DisconnectWatch
from runtime.cancellation import CANCEL_KEY, Cancellation
from runtime.request_pool import RequestPool
from tests.support.errors import error_of

_native_ident = monkey.get_original("_thread", "get_ident")


class Where:
    """Answers with the thread it ran on, the body it read and whether it had a Cancellation."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"thread": _native_ident(), "body": req.bounded_stream.read().decode(),
                      "cancel": isinstance(req.env.get(CANCEL_KEY), Cancellation)}

    on_get = on_post


class Deferred:
    """A body the driver must resolve in the hub (as streaming.body.DeferredBody)."""

    def __init__(self) -> None:
        self.resolved_with: Cancellation | None = None

    def resolve(self, cancel: Cancellation) -> tuple[str, list[tuple[str, str]], bytes]:
        self.resolved_with = cancel
        return "201 Created", [("Content-Type", "text/plain"), ("Content-Length", "2")], b"ok"

    def __iter__(self):
        raise AssertionError("iterated instead of resolved")


class DeferredResource:
    def __init__(self) -> None:
        self.body = Deferred()

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.stream = self.body


@pytest.fixture(scope="module")
def pool():
    p = RequestPool(1)
    yield p
    p.shutdown()


def client(pool: RequestPool, *, enabled: bool = True, deferred=None,
           max_body_bytes: int = 1000) -> falcon.testing.TestClient:
    app = falcon.App()
    error_handlers.install(app)
    app.add_route("/v1/completions", Where())
    app.add_route("/health", Where())
    app.add_route("/tokenize", deferred or DeferredResource())
    return falcon.testing.TestClient(OffloadMiddleware(
        app, pool=lambda: pool, enabled=enabled, max_body_bytes=max_body_bytes))


def test_heavy_paths_run_on_a_pool_thread_with_the_body_read_in_the_hub(pool):
    r = client(pool).simulate_post("/v1/completions", body="hello")
    assert r.status_code == 200
    assert r.json["body"] == "hello" and r.json["cancel"] is True
    assert r.json["thread"] != _native_ident()


def test_light_paths_and_the_offload_switch_stay_in_the_hub(pool):
    assert client(pool).simulate_get("/health").json["thread"] == _native_ident()
    inline = client(pool, enabled=False).simulate_post("/v1/completions", body="x").json
    assert inline["thread"] == _native_ident() and inline["body"] == "x"


def test_an_oversized_body_is_413_before_any_work(pool):
    r = client(pool, max_body_bytes=4).simulate_post("/v1/completions", body="too long")
    error = error_of(r, 413)
    assert "exceeds the limit of 4 bytes" in error["message"]


def test_a_deferred_body_is_resolved_in_the_hub_with_its_status(pool):
    resource = DeferredResource()
    r = client(pool, deferred=resource).simulate_post("/tokenize", body="{}")
    assert r.status_code == 201 and r.content == b"ok"
    assert isinstance(resource.body.resolved_with, Cancellation)


def test_a_failure_outside_falcon_is_a_500_envelope(pool):
    def broken(environ, start_response):
        raise RuntimeError("boom")
    app = falcon.testing.TestClient(OffloadMiddleware(broken, pool=lambda: pool, enabled=True,
                                                      max_body_bytes=100))
    error = error_of(app.simulate_post("/v1/completions", body="{}"), 500)
    assert error["message"] == "Internal server error: boom"


def _watched_pair():
    """A connected pair of gevent sockets; the server end watched for the client's close."""
    import gevent.socket
    server, peer = gevent.socket.socketpair()
    cancel = Cancellation()
    return server, peer, cancel, DisconnectWatch(server, cancel)


def test_a_client_that_closes_its_connection_cancels_its_request():
    server, peer, cancel, _ = _watched_pair()
    gevent.sleep(0.01)
    assert not cancel.cancelled
    peer.close()
    assert wait_until(lambda: cancel.cancelled)
    server.close()


def test_a_pipelined_request_or_a_finished_response_cancels_nothing():
    server, peer, cancel, watch = _watched_pair()
    peer.sendall(b"GET / HTTP/1.1\r\n\r\n")  # the next request: the watch ends, seeing data
    gevent.sleep(0.05)
    peer.close()
    gevent.sleep(0.05)
    assert not cancel.cancelled
    assert server.recv(4) == b"GET "  # the peek left the bytes for gunicorn
    server.close()
    server, peer, cancel, watch = _watched_pair()
    watch.stop()
    watch.stop()  # idempotent
    peer.close()
    gevent.sleep(0.05)
    assert not cancel.cancelled
    server.close()


def wait_until(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        gevent.sleep(0.01)
    return True
