"""The Anthropic Messages API's settings (``docs/messages.md`` §3), a mixin of ``base.config.Config``.

Runs on: import time (declarations only).
"""
from __future__ import annotations

from dataclasses import dataclass

from base.settings import choice, setting


@dataclass(frozen=True)
class MessagesSettings:
    """How /v1/messages converts what has no chat counterpart."""

    anthropic_disabled_thinking_effort: str = setting(
        ("GREENFRONT_ANTHROPIC_DISABLED_THINKING_EFFORT",),
        choice("auto", "none", "low", "medium", "high", "xhigh", "max"), "auto",
        "the `reasoning_effort` of a /v1/messages `thinking: {\"type\": \"disabled\"}` "
        "(`--anthropic-disabled-thinking-effort`); `auto`: \"none\", or \"low\" when the chat "
        "template fails on \"none\" or ignores it (docs/messages.md §3)")
