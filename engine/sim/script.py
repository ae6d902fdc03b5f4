"""Scripting the simulator's output by text: the ``vllm_xargs`` that make it emit given text.

The simulator emits ``sim_tokens`` verbatim (then EOS when the request has one); this turns text
into those ids with the served model's tokenizer, so tests and the bench can say what the
"model" answers — a tool call, a thought, a truncated call — in words. vLLM's own frontend on the
simulator passes the same ``vllm_xargs`` through, so both frontends see the same output.

Runs on: test and bench processes (never the server).
"""
from __future__ import annotations

from typing import Any


def script_ids(tokenizer: Any, text: str) -> list[int]:
    """The ids of ``text`` (marker tokens such as ``<tool_call>`` become their single ids)."""
    return list(tokenizer.encode(text, False))


def scripted(tokenizer: Any, text: str, **extra: Any) -> dict[str, Any]:
    """``vllm_xargs`` making the simulator answer ``text`` (plus other ``sim_*`` knobs)."""
    return {"sim_tokens": script_ids(tokenizer, text), **extra}
