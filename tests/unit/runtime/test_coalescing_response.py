"""gunicorn's responses with the headers sent along with the first body bytes
(``runtime.gunicorn_hot_path.CoalescingResponse``) put the same bytes on the wire as gunicorn's
own, in fewer sends.

Real parts: gunicorn's request parser and response on gevent sockets over a real TCP
connection; the client reads everything the server wrote.
"""
from __future__ import annotations

import time

import gevent.socket
import pytest
from gunicorn.config import Config as GunicornConfig
from gunicorn.http import wsgi
from gunicorn.http.parser import RequestParser

from runtime import gunicorn_hot_path

GET = b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n"
HEAD = b"HEAD /x HTTP/1.1\r\nHost: a\r\n\r\n"
OLD = b"GET /x HTTP/1.0\r\n\r\n"

CASES = [  # (request, status, headers, body writes)
    (GET, "200 OK", [("Content-Type", "text/event-stream")], [b"data: 1\n\n", b"", b"data: 2\n\n"]),
    (GET, "200 OK", [("Content-Length", "5")], [b"hello"]),
    (GET, "200 OK", [("Content-Length", "3")], [b"hello"]),  # longer than its length: cut
    (GET, "200 OK", [], []),  # chunked, no body at all
    (GET, "200 OK", [], [b""]),  # chunked, an empty write only
    (GET, "204 No Content", [], [b"x"]),  # a body where none may be
    (HEAD, "200 OK", [("Content-Length", "5")], [b"hello"]),
    (OLD, "200 OK", [], [b"old ", b"client"]),
    (GET, "200 OK", [], [b"x" * 100_000, b"tail"]),  # bigger than COALESCE_MAX
]


class CountingSocket(gevent.socket.socket):
    """A gevent socket that counts ``sendall`` calls (a subclass: ``send`` then uses them)."""
    sends = 0

    def sendall(self, data, flags=0):
        type(self).sends += 1
        return super().sendall(data, flags)


def _exchange(response_class, request: bytes, status, headers, writes, sock_class):
    """The bytes a client gets for one response written by ``response_class``."""
    listener = gevent.socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = gevent.socket.create_connection(listener.getsockname())
    accepted, addr = listener.accept()
    server = sock_class(fileno=accepted.detach())
    client.sendall(request)
    cfg = GunicornConfig()
    req = next(iter(RequestParser(cfg, server, addr)))
    resp = response_class(req, server, cfg)
    resp.start_response(status, list(headers))
    for data in writes:
        resp.write(data)
    resp.close()
    server.close()
    received = []
    while chunk := client.recv(65536):
        received.append(chunk)
    client.close()
    listener.close()
    return b"".join(received)




@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("sock_class", [gevent.socket.socket, CountingSocket])
def test_the_wire_bytes_are_gunicorns(case, sock_class):
    request, status, headers, writes = CASES[case]
    for _ in range(20):  # until both ran within one second (the Date header)
        second = int(time.time())
        theirs = _exchange(gunicorn_hot_path._GunicornResponse, request, status, headers, writes,
                           sock_class)
        ours = _exchange(gunicorn_hot_path.CoalescingResponse, request, status, headers, writes,
                         sock_class)
        if int(time.time()) == second:
            break
    assert ours == theirs
    assert theirs.startswith(b"HTTP/1.")


def test_headers_go_out_with_the_first_body_bytes_and_the_end_with_nothing_else():
    request, status, headers, writes = CASES[0]  # a stream: two chunks and an empty write
    CountingSocket.sends = 0
    _exchange(gunicorn_hot_path._GunicornResponse, request, status, headers, writes,
              CountingSocket)
    assert CountingSocket.sends == 4  # headers, two chunks, the last chunk
    CountingSocket.sends = 0
    _exchange(gunicorn_hot_path.CoalescingResponse, request, status, headers, writes,
              CountingSocket)
    assert CountingSocket.sends == 3
    CountingSocket.sends = 0
    _exchange(gunicorn_hot_path.CoalescingResponse, GET, "200 OK", [], [], CountingSocket)
    assert CountingSocket.sends == 1  # headers and the last chunk together


def test_install_makes_it_the_class_gunicorn_creates():
    from gunicorn import util
    from gunicorn.http import message
    saved = wsgi.base_environ, util.http_date, message._ip_in_allow_list, wsgi.Response
    try:
        gunicorn_hot_path.install(GunicornConfig())
        assert wsgi.Response is gunicorn_hot_path.CoalescingResponse
    finally:
        wsgi.base_environ, util.http_date, message._ip_in_allow_list, wsgi.Response = saved
        gunicorn_hot_path._environ = None
