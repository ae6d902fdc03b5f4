"""Settings of the vLLM parity surface (issue 25): ``/tokenizer_info``, ``--tokens-only``.

A mixin of ``base.config.Config``: declared here so that the features that read them keep their
settings in one place (``docs/parity.md``).

Runs on: import time, as ``base.config``.
"""
from __future__ import annotations

from dataclasses import dataclass

from base.settings import boolean, setting


@dataclass(frozen=True)
class ParitySettings:
    """Switches for vLLM 0.32 frontend routes that are off unless asked for."""

    enable_tokenizer_info_endpoint: bool = setting(
        ("GREENFRONT_ENABLE_TOKENIZER_INFO_ENDPOINT",), boolean, False, "serve `GET "
        "/tokenizer_info` (`--enable-tokenizer-info-endpoint`): the tokenizer's configuration "
        "and chat template")
    tokens_only: bool = setting(
        ("GREENFRONT_TOKENS_ONLY",), boolean, False, "vLLM's `--tokens-only`: serve as a "
        "token-in/token-out stage (no detokenization on `/inference/v1/generate`, the "
        "unauthenticated `POST /abort_requests`, the routes that need the tokenizer answer 400; "
        "`docs/parity.md` §9)")
