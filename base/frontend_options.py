"""Settings of vLLM 0.32 frontend options that shape answers (docs/options.md §2): a mixin of
``base.config.Config``.

``--args-json`` and ``greenfront serve`` turn ``--return-tokens-as-token-ids``,
``--exclude-tools-when-tool-choice-none`` and ``--sse-keep-alive-interval`` into these
(``launch/args_json.py``); they mean what they mean in vLLM's Python frontend.

Runs on: import time of the gunicorn master and of each worker (read-only afterwards).
"""
from __future__ import annotations

from dataclasses import dataclass

from base.settings import boolean, non_negative_int, setting


@dataclass(frozen=True)
class FrontendOptions:
    """vLLM frontend options, as settings."""

    return_tokens_as_token_ids: bool = setting(
        ("GREENFRONT_RETURN_TOKENS_AS_TOKEN_IDS",), boolean, False,
        "`--return-tokens-as-token-ids`: logprobs tokens as `token_id:N` unless a request says "
        "`return_tokens_as_token_ids: false`")
    exclude_tools_when_tool_choice_none: bool = setting(
        ("GREENFRONT_EXCLUDE_TOOLS_WHEN_TOOL_CHOICE_NONE",), boolean, False,
        "`--exclude-tools-when-tool-choice-none`: chat with `tool_choice: \"none\"` renders no "
        "tools (`/tokenize` still does)")
    sse_keep_alive_interval: int = setting(
        ("GREENFRONT_SSE_KEEP_ALIVE_INTERVAL",), non_negative_int, 0,
        "`--sse-keep-alive-interval`: seconds a stream may wait for its next chunk before a "
        "`: keep-alive` comment line (0: never)")
