"""The gathered outputs of a pooling request, and how vectors are written (docs/pooling.md §3).

``PooledState`` is the output state ``streaming.body.DeferredBody`` fills: each engine request
finishes with one output whose ``pooling_output`` is vLLM's array triple (inline ext 3, or an aux
frame of the same message), decoded once to floats. ``encode`` writes a vector as a JSON list or
as base64 of its float32/float16 bytes.

Runs on: the HTTP hub (``add``, while the body resolves) and the renderer it calls.
"""
from __future__ import annotations

import base64
import struct
import sys
from typing import Any

from base.errors import InvalidRequest, ServerError
from engine.protocol import FinishReason
from engine.protocol.ndarray import ndarray_to_list
from streaming.output import OutputState

#: vLLM's ``embed_dtype`` names greenfront writes, as ``struct`` codes.
_DTYPES = {"float32": "f", "float16": "e"}
_ORDER = {"little": "<", "big": ">", "native": "<" if sys.byteorder == "little" else ">"}


class PooledState(OutputState):
    """One vector (or score list) per input, and the prompt tokens they took."""

    def __init__(self, prompt_lengths: list[int]) -> None:
        self.vectors: list[list[float] | None] = [None] * len(prompt_lengths)
        self.prompt_tokens = sum(prompt_lengths)
        self._left = len(prompt_lengths)

    @property
    def all_finished(self) -> bool:
        return self._left == 0

    def add(self, index: int, output: Any, frames: list | None = None) -> None:
        """One engine output; a pooling request has exactly one, its last."""
        reason = output.finish_reason
        if reason is None:
            return None
        if reason == FinishReason.ERROR or output.pooling_output is None:
            raise ServerError("Internal server error")
        if self.vectors[index] is None:
            self.vectors[index] = [float(v) for v in ndarray_to_list(output.pooling_output,
                                                                     frames)]
            self._left -= 1
        return None

    def usage(self) -> dict[str, Any]:
        """vLLM's ``UsageInfo`` of a pooling response: prompt tokens only."""
        return {"prompt_tokens": self.prompt_tokens, "total_tokens": self.prompt_tokens,
                "completion_tokens": 0, "prompt_tokens_details": None,
                "completion_tokens_details": None}


def check_encoding(f: dict[str, Any]) -> None:
    """Refuse the encodings greenfront does not write (docs/pooling.md §2)."""
    if f["encoding_format"] in ("bytes", "bytes_only"):
        raise InvalidRequest(f"greenfront does not implement `encoding_format: "
                             f"{f['encoding_format']}`; use float or base64.",
                             param="encoding_format")
    if f["embed_dtype"] not in _DTYPES:
        raise InvalidRequest(f"greenfront does not implement `embed_dtype: {f['embed_dtype']}`; "
                             "use float32 or float16.", param="embed_dtype")


def encode(vector: list[float], f: dict[str, Any]) -> list[float] | str:
    """A vector as the request asked: floats, or base64 of its bytes (vLLM's default: float32 in
    the host's order, little-endian here, as the OpenAI client decodes it)."""
    if f["encoding_format"] == "float":
        return vector
    code = _ORDER[f["endianness"]] + _DTYPES[f["embed_dtype"]] * len(vector)
    return base64.b64encode(struct.pack(code, *vector)).decode("ascii")
