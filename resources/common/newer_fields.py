"""Request fields of vLLM (0.32's, and 0.33's) that greenfront does not serve: refused when
set to anything but their default, never accepted and ignored (docs/vllm-versions.md §3).

vLLM 0.32 ignores fields it does not know, so a client written for 0.33 would get a silent
no-op from a 0.32-compatible server; these are the fields whose absence changes an answer.
The unit test ``tests/unit/test_no_silent_ignore.py`` checks every request field of vLLM 0.32's
models is declared by greenfront or listed here.

Called by: the raw-body checks of chat, completions and /inference/v1/generate.
Runs on: request pool threads (pure functions).
"""
from __future__ import annotations

from typing import Any

from base.errors import InvalidRequest

_SHARED: dict[str, tuple[Any, ...]] = {
    # 0.33: the weight version that sampled each range of output tokens.
    "return_weight_versions": (None, False),
    # 0.32: encoder-cache transfer for multimodal disaggregated serving (text-only here).
    "ec_transfer_params": (None, {}),
    # 0.32: character offsets of each token.
    "return_token_offsets": (None, False),
    # 0.32: routed-expert data, which greenfront does not return at all.
    "routed_experts_prompt_start": (None, 0),
}

#: endpoint -> field -> the values served (its default); any other value is refused.
UNSERVED: dict[str, dict[str, tuple[Any, ...]]] = {
    "chat": _SHARED,
    "completions": _SHARED,
}

#: Fields accepted without effect because the served models are text-only: they only shape
#: multimodal items of a render response.
TEXT_ONLY_NO_EFFECT = frozenset({"mm_payload", "return_mm_kwargs"})


def refuse_unserved(body: dict, endpoint: str) -> None:
    """A 400 naming the first field of ``UNSERVED[endpoint]`` set to a value not served."""
    for name, served in UNSERVED[endpoint].items():
        value = body.get(name)
        # The type too: 0 is no "false", and false no 0.
        if value is None or any(value == v and type(value) is type(v) for v in served):
            continue
        raise InvalidRequest(f"`{name}` is not supported by this server (greenfront).",
                             param=name)


def refuse_derender(body: dict) -> None:
    """0.33's ``output_mode: "derender"`` on /inference/v1/generate (its ``parse_context`` is
    read only in that mode, so it is ignored otherwise, as 0.33 does)."""
    if body.get("output_mode") == "derender":
        raise InvalidRequest("output_mode='derender' (vLLM 0.33) is not supported by this "
                             "server (greenfront).", param="output_mode")
