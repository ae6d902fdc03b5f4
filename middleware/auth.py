"""API-key check (``Authorization: Bearer <key>``) when keys are configured; ``EXEMPT_PATHS``
(/health, /ready, /metrics, /version) answer without one: vLLM guards only its /v1, /v2,
/inference and /cohere paths.

Runs on: the HTTP hub or a pool thread (whichever runs the Falcon call).
"""
from __future__ import annotations

import hmac

import falcon

from errors import Unauthorized

EXEMPT_PATHS = frozenset({"/health", "/ready", "/metrics", "/version"})


class AuthMiddleware:
    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = tuple(k.encode() for k in keys)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if not self._keys or req.path in EXEMPT_PATHS:
            return
        header = req.get_header("Authorization") or ""
        scheme, _, token = header.partition(" ")
        given = token.strip().encode()
        if scheme.lower() != "bearer" or not any(hmac.compare_digest(given, k)
                                                 for k in self._keys):
            raise Unauthorized("Unauthorized")
