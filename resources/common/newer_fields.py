"""Request fields of vLLM releases after 0.32 that greenfront does not implement: refused when
set, never accepted and ignored (docs/vllm-versions.md §3).

vLLM 0.32 ignores fields it does not know, so a client written for 0.33 would get a silent
no-op from a 0.32-compatible server; these are the ones whose absence changes an answer.

Called by: the raw-body checks of chat, completions and /inference/v1/generate.
Runs on: request pool threads (pure functions).
"""
from __future__ import annotations

from base.errors import InvalidRequest


def refuse_weight_versions(body: dict) -> None:
    """0.33's ``return_weight_versions`` (chat, completions): only false/absent is served."""
    value = body.get("return_weight_versions")
    if value is not None and value is not False:
        raise InvalidRequest("`return_weight_versions` (vLLM 0.33) is not supported by this "
                             "server (greenfront).", param="return_weight_versions")


def refuse_derender(body: dict) -> None:
    """0.33's ``output_mode: "derender"`` on /inference/v1/generate (its ``parse_context`` is
    read only in that mode, so it is ignored otherwise, as 0.33 does)."""
    if body.get("output_mode") == "derender":
        raise InvalidRequest("output_mode='derender' (vLLM 0.33) is not supported by this "
                             "server (greenfront).", param="output_mode")
