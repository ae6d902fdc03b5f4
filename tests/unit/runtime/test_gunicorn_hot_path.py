"""gunicorn's settings, base environ, allow-list checks and Date, cached in a worker, answer as
gunicorn's do.

Real parts: gunicorn's own functions and config, and a listening socket for the listener's name.
"""
from __future__ import annotations

import ipaddress
import socket
import time

import pytest
from gunicorn import util
from gunicorn.config import Config as GunicornConfig
from gunicorn.http import message, wsgi

from runtime import gunicorn_hot_path
from runtime.accept import KnownNameListener


@pytest.fixture
def installed():
    """``install`` for a gunicorn config; gunicorn's functions put back after the test."""
    saved = wsgi.base_environ, util.http_date, message._ip_in_allow_list, wsgi.Response
    cfg = GunicornConfig()
    gunicorn_hot_path.install(cfg)
    yield cfg
    wsgi.base_environ, util.http_date, message._ip_in_allow_list, wsgi.Response = saved
    gunicorn_hot_path._environ = None


def _comparable(environ: dict) -> dict:
    errors = environ.pop("wsgi.errors")
    return {**environ, "wsgi.errors": (type(errors), errors.streams)}


def test_the_base_environ_is_gunicorns_and_a_fresh_copy_per_request(installed):
    original = gunicorn_hot_path._gunicorn_base_environ(installed)
    first = wsgi.base_environ(installed)
    assert _comparable(dict(first)) == _comparable(original)
    first["REQUEST_METHOD"] = "GET"
    first["wsgi.multithread"] = True
    second = wsgi.base_environ(installed)
    assert "REQUEST_METHOD" not in second and second["wsgi.multithread"] is False


def test_another_config_gets_gunicorns_own_base_environ(installed):
    other = GunicornConfig()
    other.set("workers", 3)
    assert wsgi.base_environ(other)["wsgi.multiprocess"] is True
    assert wsgi.base_environ(installed)["wsgi.multiprocess"] is False


def test_refresh_rebuilds_the_error_stream_wrapper(installed):
    before = wsgi.base_environ(installed)["wsgi.errors"]
    gunicorn_hot_path.refresh()
    after = wsgi.base_environ(installed)["wsgi.errors"]
    assert after is not before and after.streams == before.streams


def test_the_date_is_gunicorns_text_for_the_current_second(installed):
    for _ in range(50):
        second = int(time.time())
        ours = util.http_date()
        theirs = gunicorn_hot_path._gunicorn_http_date()
        if int(time.time()) == second:  # no second boundary crossed in between
            assert ours == theirs
            assert util.http_date() is ours  # formatted once within the second
            break
    else:
        pytest.fail("never stayed within one second")
    assert util.http_date(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT"


def test_the_listener_name_is_read_once_and_the_rest_is_the_sockets():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        listener = KnownNameListener(sock)
        assert listener.getsockname() == sock.getsockname()
        assert listener.fileno() == sock.fileno()


def test_settled_settings_read_as_gunicorns(installed):
    fresh = GunicornConfig()
    for name in fresh.settings:
        assert getattr(installed, name) == getattr(fresh, name), name
    assert installed.is_ssl == fresh.is_ssl and installed.address == fresh.address


def test_the_allow_list_answer_is_gunicorns_per_peer(installed):
    allowed, networks = installed.forwarded_allow_ips, installed.forwarded_allow_networks()
    for peer in ("127.0.0.1", "10.1.2.3", "::1", "not an address", "127.0.0.1"):
        expected = gunicorn_hot_path._gunicorn_ip_in_allow_list(peer, allowed, networks)
        assert message._ip_in_allow_list(peer, allowed, networks) is expected
    assert ("10.1.2.3", id(allowed), id(networks)) in gunicorn_hot_path._trusted
    other = ["10.0.0.0/8"]  # not the worker's list: answered, never kept
    nets = [ipaddress.ip_network("10.0.0.0/8")]
    assert message._ip_in_allow_list("10.1.2.3", other, nets) is True
    assert ("10.1.2.3", id(other), id(nets)) not in gunicorn_hot_path._trusted
