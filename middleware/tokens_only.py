"""``--tokens-only``: the routes that need the tokenizer answer vLLM's 400 (docs/parity.md §9).

vLLM 0.32's ``vllm serve --tokens-only`` loads no tokenizer (``skip_tokenizer_init``) yet keeps
every route registered: the text routes then fail when they reach for the tokenizer, most with
a 400 ``Tokenizer not available when `skip_tokenizer_init=True```, chat and ``/v1/messages``
with an empty 500. greenfront answers that 400 on all of them, before the request is read (in
Anthropic's envelope on ``/v1/messages``), so that no text request reaches an engine that has
no tokenizer. The routes stay listed in ``/openapi.json``, as in vLLM's.

``/v1/completions`` is refused whole: vLLM still serves token-id prompts there (empty ``text``,
stop strings silently unused, 400 for ``logprobs`` and ``echo``); greenfront points those
clients at ``/inference/v1/generate`` instead.

Runs on: the HTTP hub or a pool thread (whichever runs the Falcon call), after the API-key check.
"""
from __future__ import annotations

import falcon

from base.errors import InvalidRequest

#: vLLM's renderer's words when a route asks for the tokenizer it did not load.
MESSAGE = "Tokenizer not available when `skip_tokenizer_init=True`"

#: (method, path) of every route that needs the tokenizer, with the envelope of its errors.
TEXT_ROUTES: dict[tuple[str, str], str] = {
    ("POST", "/v1/completions"): "openai",
    ("POST", "/v1/chat/completions"): "openai",
    ("POST", "/v1/responses"): "openai",
    ("POST", "/v1/messages"): "anthropic",
    ("POST", "/v1/messages/count_tokens"): "anthropic",
    ("POST", "/tokenize"): "openai",
    ("POST", "/detokenize"): "openai",
    ("GET", "/tokenizer_info"): "openai",
}


def needs_tokenizer(method: str, path: str) -> str | None:
    """The error envelope of a route that needs the tokenizer, or None for the others."""
    return TEXT_ROUTES.get((method, path.rstrip("/") or "/"))


class TokensOnlyMiddleware:
    """Falcon middleware: refuses the text routes (installed only with ``--tokens-only``)."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        envelope = needs_tokenizer(req.method, req.path)
        if envelope is not None:
            error = InvalidRequest(MESSAGE)
            error.envelope = envelope
            raise error
