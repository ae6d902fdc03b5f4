"""``--root-path``: serving behind a proxy that forwards a path prefix.

As FastAPI's ``root_path`` does in vLLM 0.32 (Starlette's route matching): a request path that
starts with the root path followed by ``/`` is routed without it (``/api/v1/models`` is
``/v1/models``; the prefix moves to ``SCRIPT_NAME``), a path without the prefix is routed as it
is, and the bare prefix matches no route (it is left as it is). The API key's guarded paths are read after this, as
vLLM's middleware strips the prefix too; ``/openapi.json`` lists the prefix as its server.

Runs on: the HTTP hub (a WSGI wrapper, string work only).
"""
from __future__ import annotations

from typing import Callable, Iterable


class RootPath:
    def __init__(self, app: Callable, root_path: str) -> None:
        self._app = app
        self._root = root_path

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        path, root = environ.get("PATH_INFO", ""), self._root
        if path.startswith(root) and path[len(root):].startswith("/"):
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + root
            environ["PATH_INFO"] = path[len(root):]
        return self._app(environ, start_response)

