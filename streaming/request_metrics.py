"""``--enable-per-request-metrics``: the ``metrics`` object of a chat or completions answer
(docs/options.md §2), from the request's engine timing (``engine.request_stats``).

As vLLM 0.32 computes it: times in ms on the engine's clock; ``time_to_first_token_ms`` from
scheduling to the first token, ``generation_time_ms`` first to last token, ``queue_time_ms``
queued to scheduled, ``mean_itl_ms`` the decode time over the tokens after the first,
``tokens_per_second`` all generated tokens over scheduling to last token; each null when its
timestamps are missing. Only for one prompt with ``n`` 1 (otherwise the figures belong to one
sample of several: null). ``speculative_decoding`` is always null (no draft models here).

Runs on: the HTTP hub (rendering), after the request finished.
"""
from __future__ import annotations

from typing import Any


def request_metrics(state: Any) -> dict[str, Any] | None:
    """The ``metrics`` object of ``state``'s answer, or None (the option off, several samples,
    or no timing: metrics not recorded)."""
    if not state.ctx.enable_per_request_metrics or len(state.choices) != 1:
        return None
    timings = getattr(state, "timings", None) or [None]
    timing = timings[0]
    if timing is None:
        return None
    generated = state.choices[0].num_output_tokens
    queued, scheduled = timing.queued, timing.scheduled
    first, last = timing.first_token, timing.last_token
    out: dict[str, Any] = {"time_to_first_token_ms": None, "generation_time_ms": None,
                           "queue_time_ms": None, "mean_itl_ms": None,
                           "tokens_per_second": None, "speculative_decoding": None}
    if scheduled > 0 and first > 0:
        out["time_to_first_token_ms"] = (first - scheduled) * 1000
    if first > 0 and last > 0:
        out["generation_time_ms"] = (last - first) * 1000
        if generated > 1:
            out["mean_itl_ms"] = (last - first) / (generated - 1) * 1000
    if queued > 0 and scheduled > 0:
        out["queue_time_ms"] = (scheduled - queued) * 1000
    if scheduled > 0 and last > 0 and last > scheduled:
        out["tokens_per_second"] = generated / ((last - scheduled) * 1000) * 1000
    return out


def stream_metrics(state: Any) -> dict[str, Any] | None:
    """The same on a stream's usage chunk, where vLLM leaves the null fields out."""
    metrics = request_metrics(state)
    if metrics is None:
        return None
    return {k: v for k, v in metrics.items() if v is not None}
