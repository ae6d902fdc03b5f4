"""API-key check (``Authorization: Bearer <key>``, or Anthropic's ``x-api-key: <key>``) when keys are configured, on exactly the paths
vLLM 0.32 guards: those under ``/v1``, ``/v2``, ``/inference`` and ``/cohere``; every other path
(/health, /ready, /metrics, /version, /tokenize, /openapi.json, …) and every OPTIONS request
(CORS preflights) answer without one.

Runs on: the HTTP hub or a pool thread (whichever runs the Falcon call).
"""
from __future__ import annotations

import hmac

import falcon

from base.errors import Unauthorized

GUARDED_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")


class AuthMiddleware:
    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = tuple(k.encode() for k in keys)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if (not self._keys or req.method == "OPTIONS"
                or not req.path.startswith(GUARDED_PREFIXES)):
            return
        header = req.get_header("Authorization") or ""
        scheme, _, token = header.partition(" ")
        given = [token.strip().encode()] if scheme.lower() == "bearer" else []
        # Anthropic's clients send their key as x-api-key (vLLM 0.32 looks only at the bearer
        # token, so its /v1/messages refuses them; greenfront accepts either).
        other = req.get_header("x-api-key")
        if other is not None:
            given.append(other.strip().encode())
        if not any(hmac.compare_digest(g, k) for g in given for k in self._keys):
            raise Unauthorized("Unauthorized")
