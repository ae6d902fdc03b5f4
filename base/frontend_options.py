"""Settings of vLLM 0.32 frontend options that shape answers (docs/options.md §2): a mixin of
``base.config.Config``.

``--args-json`` and ``greenfront serve`` turn ``--return-tokens-as-token-ids``,
``--exclude-tools-when-tool-choice-none``, ``--sse-keep-alive-interval`` and
``--custom-histogram-buckets`` into these
(``launch/args_json.py``); they mean what they mean in vLLM's Python frontend.

Runs on: import time of the gunicorn master and of each worker (read-only afterwards).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from base.settings import boolean, non_negative_int, setting

#: vLLM 0.32's histogram bucket families (``vllm/v1/metrics/buckets.py``).
BUCKET_FAMILIES = frozenset({
    "request_latency", "time_to_first_token", "inter_token_latency", "iteration_tokens",
    "request_params_n", "request_num_preemptions", "request_tokens", "kv_cache_residency"})


def histogram_buckets(value: Any) -> dict[str, tuple[float, ...]]:
    """``--custom-histogram-buckets``: a JSON object (or its text) of family -> bounds, checked
    as vLLM checks it at start (its messages): known families, non-empty lists of finite,
    positive, strictly increasing numbers (no booleans)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"custom_histogram_buckets: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("custom_histogram_buckets must be a JSON object of family -> bounds")
    out: dict[str, tuple[float, ...]] = {}
    for family, bounds in value.items():
        if not isinstance(bounds, list) or not all(
                isinstance(b, (int, float)) for b in bounds):
            raise ValueError(f"custom_histogram_buckets[{family!r}]: bounds must be a list of "
                             "numbers")
        for bound in bounds:
            if isinstance(bound, bool):
                raise ValueError(f"custom_histogram_buckets[{family!r}]: bound {bound!r} must "
                                 "be a number, not a boolean")
        if family not in BUCKET_FAMILIES:
            raise ValueError(f"custom_histogram_buckets: unknown bucket family {family!r}; "
                             f"known families: {sorted(BUCKET_FAMILIES)}")
        if not bounds:
            raise ValueError(f"custom_histogram_buckets[{family!r}]: bucket list must not be "
                             "empty")
        for bound in bounds:
            if not math.isfinite(bound) or bound <= 0:
                raise ValueError(f"custom_histogram_buckets[{family!r}]: bound {bound!r} must "
                                 "be finite and greater than 0")
        if any(a >= b for a, b in zip(bounds, bounds[1:])):
            raise ValueError(f"custom_histogram_buckets[{family!r}]: bounds {bounds} must be "
                             "strictly increasing")
        out[family] = tuple(float(b) for b in bounds)
    return out


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
    enable_per_request_metrics: bool = setting(
        ("GREENFRONT_ENABLE_PER_REQUEST_METRICS",), boolean, False,
        "`--enable-per-request-metrics`: a `metrics` object (time to first token, generation, "
        "queue and inter-token times, tokens per second) in chat and completions answers")
    custom_histogram_buckets: dict[str, tuple[float, ...]] | None = setting(
        ("GREENFRONT_CUSTOM_HISTOGRAM_BUCKETS",), histogram_buckets, None,
        "`--custom-histogram-buckets`: JSON family -> bucket bounds replacing vLLM's defaults "
        "for every histogram of that family (`request_latency`, `request_tokens`, ...)")
