"""What gunicorn recomputes for every HTTP/1 request, computed once in a greenfront worker.

gunicorn (27) reads its settings through ``Config.__getattr__`` (23 reads per request), builds a
fresh base WSGI environ per request (``http.wsgi.base_environ``: its ``wsgi.errors`` wrapper walks
the error logger's handlers), parses the peer's address to check it against
``forwarded_allow_ips`` (``http.message._ip_in_allow_list``) and formats the ``Date`` header from
the clock (``util.http_date``: ``email.utils.formatdate``). All are the same for every request of
a worker (the date within one second, the check for one peer address). ``install`` (from the
worker, after fork) settles the settings and replaces the module functions gunicorn calls by name
with cached ones that answer exactly what gunicorn's would:

- each setting's value is put on the worker's ``Config`` itself, where Python finds it before
  ``__getattr__`` is asked; gunicorn sets settings only while the master loads its configuration;
- the base environ is built once by gunicorn's own function, for the worker's ``cfg``, and each
  request gets a copy; any other ``cfg`` gets gunicorn's function. gunicorn's pywsgi worker
  shares one base environ per listener the same way. ``refresh`` rebuilds it after the log files
  are reopened (SIGUSR1), so ``wsgi.errors`` writes to the new streams;
- the allow-list answer is kept per peer address (up to ``TRUSTED_CACHE`` of them), for the
  worker's own allow lists only;
- the Date text is formatted once per second by gunicorn's function and reused within it;
- a response's headers go out with its first body bytes (or with the end of a response that has
  none) in one send instead of two, and every send of a response is first tried once on the
  kernel socket: gevent's ``sendall`` asks the kernel for the socket's buffer size on every call
  (a ``getsockopt``) and goes through four Python frames before its ``send``
  (``CoalescingResponse``).

PERF: CPU per /health probe on a fresh connection (bench/probe_cpu.py, one idle worker each, five
deployments alternated, 2 rounds of 2,000 probes): all four 133-134 µs against 183-186 µs for
gunicorn's own; leaving one out: settings +19 µs, Date +10-26 µs, base environ +6-9 µs,
allow-list check +6 µs (its other round, +71 µs, was a noisy one).
(One call each, on its own: a setting read 0.5 µs, settled 0.03 µs, 23 reads a request; base
environ 3.9 µs, a copy 0.1 µs; the allow-list check 2.5 µs, cached 0.2 µs; http_date 2.8 µs,
cached 0.3 µs.) tests/unit/runtime/test_gunicorn_hot_path.py checks each answers as gunicorn's.

Runs on: the worker's main thread (``install``, ``refresh`` from the HTTP hub) and the HTTP hub
(each request); the caches are that hub's (the environ and Date each one tuple assignment, safe
to read from any thread).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import gevent.socket
from gunicorn import util
from gunicorn.http import message, wsgi

_gunicorn_base_environ: Callable[[Any], dict] = wsgi.base_environ
_gunicorn_http_date: Callable[..., str] = util.http_date
_gunicorn_ip_in_allow_list: Callable[[str, Any, Any], bool] = message._ip_in_allow_list
_GunicornResponse: type = wsgi.Response

#: Body bytes up to this many are copied behind the headers to go out in one send; a larger
#: body (a /tokenize answer of 82k ids is ~500 KB) is not copied and follows in its own.
COALESCE_MAX = 16 * 1024

#: Peer addresses whose allow-list answers are kept; past it the cache starts again.
TRUSTED_CACHE = 4096

#: (the cfg it was built for, the base environ); owned by the HTTP hub.
_environ: tuple[Any, dict] | None = None
#: (the whole second, gunicorn's Date text for it); owned by the HTTP hub.
_date: tuple[int, str] = (-1, "")
#: The worker's allow lists: ids of the (addresses, networks) pairs gunicorn checks peers against.
_allow_lists: set[tuple[int, int]] = set()
#: (peer address, ids of the addresses and networks) -> gunicorn's answer; owned by the HTTP hub.
_trusted: dict[tuple[str, int, int], bool] = {}


def install(cfg: Any) -> None:
    """In a worker process: settle gunicorn's settings, and take its per-request base environ,
    allow-list checks and Date from the caches."""
    global _environ
    settle(cfg)
    _environ = (cfg, _gunicorn_base_environ(cfg))
    _allow_lists.clear()
    _allow_lists.add((id(cfg.forwarded_allow_ips), id(cfg.forwarded_allow_networks())))
    _allow_lists.add((id(cfg.proxy_allow_ips), id(cfg.proxy_allow_networks())))
    _trusted.clear()
    wsgi.base_environ = base_environ
    message._ip_in_allow_list = ip_in_allow_list
    util.http_date = http_date
    wsgi.Response = CoalescingResponse


def settle(cfg: Any) -> None:
    """Each of ``cfg``'s settings as a plain attribute of it, where ``Config`` properties of the
    same name do not stand (those read the settled values)."""
    cls = type(cfg)
    for name, setting in cfg.settings.items():
        if not hasattr(cls, name):
            object.__setattr__(cfg, name, setting.get())


def refresh() -> None:
    """Rebuild the base environ (after the log files were reopened)."""
    global _environ
    if _environ is not None:
        _environ = (_environ[0], _gunicorn_base_environ(_environ[0]))


def base_environ(cfg: Any) -> dict:
    """gunicorn's ``base_environ(cfg)``: a copy of the one built for this worker's cfg."""
    cached = _environ
    if cached is not None and cached[0] is cfg:
        return cached[1].copy()
    return _gunicorn_base_environ(cfg)


def ip_in_allow_list(ip_str: str, allow_list: Any, networks: Any) -> bool:
    """gunicorn's ``_ip_in_allow_list``: answered once per peer address for the worker's lists."""
    key = (ip_str, id(allow_list), id(networks))
    answer = _trusted.get(key)
    if answer is None:
        answer = _gunicorn_ip_in_allow_list(ip_str, allow_list, networks)
        if key[1:] in _allow_lists:
            if len(_trusted) >= TRUSTED_CACHE:
                _trusted.clear()
            _trusted[key] = answer
    return answer


def http_date(timestamp: float | None = None) -> str:
    """gunicorn's ``http_date``: the text for the current second is formatted once."""
    global _date
    if timestamp is not None:
        return _gunicorn_http_date(timestamp)
    second = int(time.time())
    cached = _date
    if cached[0] != second:
        cached = _date = (second, _gunicorn_http_date(second))
    return cached[1]


def send(sock: Any, data: bytes) -> None:
    """``sock.sendall(data)``, tried first as one non-blocking send on the kernel socket under
    a plain gevent socket (what it does not take goes through ``sendall``)."""
    if type(sock) is gevent.socket.socket:
        try:
            sent = sock._sock.send(data)
        except BlockingIOError:
            sent = 0
        if sent == len(data):
            return
        data = memoryview(data)[sent:]
    sock.sendall(data)


class CoalescingResponse(_GunicornResponse):
    """gunicorn's HTTP/1 response, sending the same bytes in fewer sends: the headers wait for
    the first body bytes (``write``, ``close`` or ``sendfile`` sends them), and each send is
    ``send``'s. Used by the worker's requests once ``install`` ran (``wsgi.create`` looks the
    class up by name)."""

    #: the header block not sent yet
    _held: bytes | None = None

    def send_headers(self) -> None:
        if self.headers_sent:
            return
        lines = self.default_headers()
        lines.extend(["%s: %s\r\n" % (k, v) for k, v in self.headers])
        self._held = ("%s\r\n" % "".join(lines)).encode("latin-1")
        self.headers_sent = True

    def _emit_body(self, data: bytes) -> None:
        if self.chunked:
            data = b"%X\r\n%s\r\n" % (len(data), data)
        held = self._take_held()
        if held:
            if len(data) <= COALESCE_MAX:
                data = held + data
            else:
                send(self.sock, held)
        send(self.sock, data)

    def sendfile(self, respiter: Any) -> bool:
        self.send_headers()
        held = self._take_held()
        if held:
            send(self.sock, held)
        return super().sendfile(respiter)

    def close(self) -> None:
        self.send_headers()
        end = self._take_held() + (b"0\r\n\r\n" if self.chunked else b"")
        if end:
            send(self.sock, end)

    def _take_held(self) -> bytes:
        """The header block not sent yet (``b""`` once sent); it is the caller's to send."""
        held, self._held = self._held, None
        return held or b""
