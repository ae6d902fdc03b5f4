"""The simulator as a pooling engine (``--runner pooling``): deterministic outputs from the prompt.

A pooling ADD (``sampling_params`` nil, ``pooling_params`` set) is scheduled like a one-token
request and finishes in its first step with no token and a ``pooling_output`` array, as a real
0.32 engine answers (docs/pooling.md §3): float32, inline ext 3 under 256 bytes, else an aux
frame. Embed: a ``HIDDEN``-float vector hashed from the prompt ids, L2-normalized when
``use_activation`` (truncated to ``dimensions`` first, as Matryoshka models do). Classify: one
score, the sigmoid of a hashed logit when ``use_activation``.

Runs on: the simulator process.
"""
from __future__ import annotations

import math
import zlib
from array import array
from typing import Any

from engine.protocol import PrefillStats, SamplingParams
from engine.protocol.ndarray import encode_ndarray

#: The simulated embedding size (the tiny test model's hidden size).
HIDDEN = 128
#: What a pooling request is scheduled as: one step, no sampling.
POOLING_SAMPLING = SamplingParams(max_tokens=1, temperature=0.0)


def _unit(seed: int, i: int) -> float:
    """A value in [-1, 1) from a seed and a position."""
    return zlib.crc32(i.to_bytes(4, "little"), seed) / 2 ** 31 - 1.0


def pooled_values(prompt: list[int], params: Any, convert: str) -> list[float]:
    """The pooling output of ``prompt`` under ``params`` (a ``PoolingParams``)."""
    seed = zlib.crc32(array("q", prompt).tobytes())
    activate = params.use_activation is not False
    if convert == "classify":
        logit = _unit(seed, 0) * 4
        return [1 / (1 + math.exp(-logit)) if activate else logit]
    values = [_unit(seed, i) for i in range(HIDDEN)]
    if params.dimensions is not None:
        values = values[:params.dimensions]
    if activate:
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        values = [v / norm for v in values]
    return values


def pooled_output(out_cls: Any, sim: Any, aux_frames: list[bytes]) -> Any:
    """The one output that finishes a pooling request (finish reason STOP, no tokens)."""
    return out_cls(sim.request_id, [], finish_reason=0,
                   pooling_output=encode_ndarray(sim.pooling, "float32", aux_frames=aux_frames),
                   prefill_stats=PrefillStats(sim.prompt_len, sim.prompt_len))
