"""Logprobs: engine arrays -> per-position maps -> the OpenAI shapes vLLM writes.

A *position* is an insertion-ordered ``{token_id: (logprob, rank)}``: the sampled (or actual
prompt) token first with its engine rank, then the top-k with ranks 1..k; a token that is both
keeps its first slot and takes the later rank, as vLLM's per-position dict does.

Shapes (vLLM 0.32 serving layer):
- completions: ``{text_offset, token_logprobs, tokens, top_logprobs}``; ``top_logprobs`` maps the
  decoded string of the first k+1 entries to its logprob (equal strings collapse);
- chat: ``{"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}``
  with the first k entries;
- prompt logprobs: ``[None, {id: {logprob, rank, decoded_token}}, ...]``.
Logprobs are clamped at -9999.0. Tokens are decoded one id at a time with special tokens kept
(or written ``token_id:<id>`` with ``return_tokens_as_token_ids``).

Not reproduced: vLLM's correction of decoded tokens that end in U+FFFD (it re-decodes them with
preceding context); docs/text-parity.md leaves that behaviour unspecified.

Called by: ``streaming.output`` and the renderers.
Runs on: the HTTP hub (small per-token work; decoded strings are cached per tokenizer).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import orjson

from engine.protocol import logprobs_lists_to_python

Position = dict  # {token_id: (logprob, rank)}
FLOOR = -9999.0
_DECODED: dict[int, dict[int, str]] = {}


def positions_from(value: Any, k: int | None, frames: Sequence[Any] | None = None
                   ) -> list[Position]:
    """Decode ``new_logprobs``/``new_prompt_logprobs_tensors`` into positions, keeping 1 + k
    columns (the engine may send more, sized for the batch; -1/None keeps all)."""
    ids, lps, ranks = logprobs_lists_to_python(value, frames)
    out: list[Position] = []
    for row_ids, row_lps, rank in zip(ids, lps, ranks):
        width = len(row_ids) if k is None or k < 0 else min(len(row_ids), k + 1)
        pos: Position = {row_ids[0]: (float(row_lps[0]), int(rank))}
        for j in range(1, width):
            pos[row_ids[j]] = (float(row_lps[j]), j)
        out.append(pos)
    return out


def decoded(tokenizer: Any, token_id: int) -> str:
    """One token decoded alone with special tokens kept (vLLM's ``decoded_token``)."""
    cache = _DECODED.setdefault(id(tokenizer), {})
    text = cache.get(token_id)
    if text is None:
        text = cache[token_id] = tokenizer.decode([token_id], False)
    return text


def python_float(x: float) -> Any:
    """A float as Python's ``json.dumps`` writes it (non-streamed bodies): ``1e-05`` where
    orjson/pydantic write ``0.00001`` (docs/text-parity.md §6.1)."""
    if x != 0.0 and -1e-4 < x < 1e-4:
        return orjson.Fragment(repr(x).encode())
    return x


def _same(x: float) -> float:
    return x


class Namer:
    """Token names for one request: decoded text, or ``token_id:<id>``."""

    def __init__(self, tokenizer: Any, as_ids: bool) -> None:
        self.tokenizer = tokenizer
        self.as_ids = as_ids

    def __call__(self, token_id: int) -> str:
        return f"token_id:{token_id}" if self.as_ids else decoded(self.tokenizer, token_id)


def completion_logprobs(token_ids: Sequence[int], positions: Sequence[Position | None], k: int,
                        name: Namer, offset: int = 0, *, py_floats: bool = False
                        ) -> tuple[dict, int]:
    """The completions logprobs object and the text offset after it (for the next chunk)."""
    fmt: Callable[[float], Any] = python_float if py_floats else _same
    text_offset: list[int] = []
    token_logprobs: list[Any] = []
    tokens: list[str] = []
    tops: list[dict | None] = []
    for token_id, pos in zip(token_ids, positions):
        token = name(token_id)
        if pos is None:
            token_logprobs.append(None)
            tops.append(None)
        else:
            token_logprobs.append(fmt(max(pos[token_id][0], FLOOR)))
            top: dict[str, Any] = {}
            for j, (cand, (lp, _)) in enumerate(pos.items()):
                if k == -1 or j <= k:
                    top[name(cand)] = fmt(max(lp, FLOOR))
            tops.append(top)
        tokens.append(token)
        text_offset.append(offset)
        offset += len(token)
    return ({"text_offset": text_offset, "token_logprobs": token_logprobs, "tokens": tokens,
             "top_logprobs": tops}, offset)


def chat_logprobs(token_ids: Sequence[int], positions: Sequence[Position | None], k: int,
                  name: Namer, *, py_floats: bool = False, stream: bool = False,
                  token_bytes: bool = True) -> dict:
    """The chat logprobs object ``{"content": [...]}``; ``token_bytes`` False: each token's own
    ``bytes`` are null (vLLM's beam search: its step requests are not detokenized, and vLLM
    writes the bytes of the engine's decoded token only; the top entries keep theirs)."""
    fmt: Callable[[float], Any] = python_float if py_floats else _same
    content = []
    for token_id, pos in zip(token_ids, positions):
        token = name(token_id)
        if pos is None or token_id not in pos:
            entry: dict[str, Any] = {"token": token}
            if not stream:  # model defaults; a stream chunk only shows what was set
                entry["logprob"] = FLOOR
            entry["bytes"] = list(token.encode("utf-8", errors="replace"))
            if not stream:
                entry["top_logprobs"] = []
            content.append(entry)
            continue
        text = decoded(name.tokenizer, token_id)
        top = []
        for j, (cand, (lp, _)) in enumerate(pos.items()):
            if k == -1 or j < k:
                cand_name = name(cand)
                top.append({"token": cand_name, "logprob": fmt(max(lp, FLOOR)),
                            "bytes": list(cand_name.encode("utf-8", errors="replace"))})
        content.append({"token": token, "logprob": fmt(max(pos[token_id][0], FLOOR)),
                        "bytes": (list(text.encode("utf-8", errors="replace")) if token_bytes
                                  else None),
                        "top_logprobs": top})
    return {"content": content}


def prompt_logprobs_json(positions: Sequence[Position | None], tokenizer: Any, *,
                         py_floats: bool = True) -> list:
    """``prompt_logprobs`` as vLLM dumps it: None for the first token, then per-id dicts."""
    fmt: Callable[[float], Any] = python_float if py_floats else _same
    out: list = []
    for pos in positions:
        if pos is None:
            out.append(None)
            continue
        out.append({tid: {"logprob": fmt(max(lp, FLOOR)), "rank": rank,
                          "decoded_token": decoded(tokenizer, tid)}
                    for tid, (lp, rank) in pos.items()})
    return out
