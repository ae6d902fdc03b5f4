"""/inference/v1/generate bytes: stream chunks and the non-streamed body, field for field as
vLLM 0.32's ``ServingTokens`` writes them, for ``output_mode`` "tokens" and "text".

- Non-streamed: ``model_dump()`` of ``Generate{Tokens,Text}Response``: every field, nulls
  included, floats as Python's ``json`` writes them; a choice without a finish reason says
  "stop".
- Streamed: one chunk per engine step that brought tokens, a finish reason or (text mode) held
  back text; ``prompt_token_ids`` only on the first chunk (with ``return_token_ids``);
  ``weight_versions`` on a choice's finishing chunk; the usage chunk drops its nulls; the stream
  ends with ``data: [DONE]``. ``--enable-force-include-usage`` does not apply here (vLLM's
  endpoint ignores it).
- Logprobs: "tokens" mode ``{token_id, logprob, rank, top_logprobs}`` with integer ids (rank 0
  written as null); "text" mode the chat shape ``{token, logprob, bytes, top_logprobs}``. Both
  list the first ``max(k, 1)`` entries of a position (all with k = -1), sampled token first,
  and floor logprobs (NaN too) at -9999.0.

Not written (always null): ``routed_experts``, ``sampling_mask``, ``metrics`` (speculative
decoding), ``mm_placeholders``, ``prompt_token_id_logprobs``.

Called by: ``resources.generate.resource`` (through the shared resource and streaming bodies).
Runs on: the HTTP hub.
"""
from __future__ import annotations

import math
from itertools import islice
from typing import Any, Callable, Sequence

from base.jsonio import dumps
from runtime.serving_context import ServingContext
from streaming.logprobs import FLOOR, Position, decoded, prompt_logprobs_json, python_float
from streaming.output import ChoiceDelta, ChoiceState, RequestState
from streaming.prepared import PreparedRequest
from streaming.sse import DONE, frame
from streaming.stream_renderer import StreamRenderer


class _TokenIds:
    """Stands in for the detokenizer when no text can show (tokens mode, no stop strings):
    the same token ids, without decoding each one in the HTTP hub."""

    __slots__ = ("token_ids",)
    output_text = ""

    def __init__(self) -> None:
        self.token_ids: list[int] = []

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids)

    def update(self, new_token_ids: Sequence[int], stop_terminated: bool) -> None:
        self.token_ids.extend(new_token_ids)

    def get_next_output_text(self, finished: bool, delta: bool) -> str:
        return ""


class GenerateState(RequestState):
    """A request's output state plus what /generate reports besides the tokens.

    Args:
        prepared: the converted request (``output_mode``; ``detokenize`` from its SamplingParams).
        ctx: the serving context.
        generation: the engine requests; their streams carry the weight-version spans.
    """

    def __init__(self, prepared: PreparedRequest, ctx: ServingContext,
                 generation: Any = None) -> None:
        super().__init__(prepared, ctx)
        self.text_mode = prepared.output_mode == "text"
        self.detokenize = prepared.choices[0].sampling_params.detokenize
        self._streams = list(generation.streams) if generation is not None else []
        if not self.text_mode:
            for c in self.choices:
                if not c.choice.stop:
                    c.detokenizer = _TokenIds()

    def _stream_logprobs(self, state: ChoiceState, ids: list[int], positions: list[Position],
                         first: bool) -> dict | None:
        k = self.prepared.logprobs
        if k is None:
            return None
        return generate_logprobs(ids, positions, k, self.logprobs_tokenizer())

    def logprobs_tokenizer(self) -> Any:
        """The tokenizer that names logprob tokens (text mode), else None (token ids)."""
        return self.ctx.tokenizer if self.text_mode else None

    def weight_versions(self, choice_index: int) -> list[dict] | None:
        """vLLM's ``weight_versions`` of a finished choice: ``[{version, start, end}]`` spans
        over its output tokens; ``[]`` without tokens, None when no step named a version."""
        end = self.choices[choice_index].num_output_tokens
        spans = (self._streams[choice_index].weight_versions
                 if choice_index < len(self._streams) else ())
        # A stop string may have cut tokens whose step started a span: such spans are empty.
        starts = [(version, start) for version, start in spans if start < end]
        if not starts:
            return None if end else []
        ends = [start for _, start in starts[1:]] + [end]
        return [{"version": version, "start": start, "end": stop}
                for (version, start), stop in zip(starts, ends)]


def _floor(logprob: float) -> float:
    return FLOOR if math.isnan(logprob) else max(logprob, FLOOR)


def _same(x: float) -> float:
    return x


def generate_logprobs(token_ids: Sequence[int], positions: Sequence[Position | None], k: int,
                      tokenizer: Any, *, py_floats: bool = False) -> dict:
    """``{"content": [...]}`` for these tokens: integer ids without a tokenizer ("tokens"
    mode), decoded strings and their UTF-8 bytes with one ("text" mode)."""
    fmt: Callable[[float], Any] = python_float if py_floats else _same
    width = None if k == -1 else max(k, 1)

    def entry(token_id: int, logprob: float, rank: int | None) -> dict:
        if tokenizer is None:
            return {"token_id": token_id, "logprob": fmt(_floor(logprob)), "rank": rank or None}
        token = decoded(tokenizer, token_id)
        return {"token": token, "logprob": fmt(_floor(logprob)),
                "bytes": list(token.encode("utf-8", errors="replace"))}

    content = []
    for i, token_id in enumerate(token_ids):
        pos = positions[i] if i < len(positions) else None
        sampled = pos.get(token_id) if pos else None
        if sampled is None:  # vLLM's sentinel for a sampled token missing from the map
            item = entry(token_id, FLOOR, None)
        else:
            item = entry(token_id, *sampled)
            tops = pos.items() if width is None else islice(pos.items(), width)
            item["top_logprobs"] = [entry(t, lp, rank) for t, (lp, rank) in tops]
        item.setdefault("top_logprobs", [])
        content.append(item)
    return {"content": content}


class GenerateStreamRenderer(StreamRenderer):
    """Turns ``ChoiceDelta``s of one streamed /generate request into SSE frames."""

    def __init__(self, prepared: PreparedRequest, ctx: ServingContext) -> None:
        self.prepared = prepared
        self.mode = prepared.output_mode
        self.text_mode = self.mode == "text"
        # vLLM attaches the prompt to the first chunk it writes, whichever choice that is.
        self._prompt_ids = (prepared.choices[0].prompt_token_ids
                            if prepared.return_token_ids and prepared.choices else None)

    def chunk(self, choice_index: int, delta: ChoiceDelta | None, state: GenerateState) -> bytes:
        """The frame for one delta, or b"" when vLLM would send nothing for it."""
        if delta is None:
            return b""
        finished = delta.finish_reason is not None
        if not (delta.token_ids or finished or (self.text_mode and delta.text)):
            return b""
        choice: dict[str, Any] = {
            "index": delta.index, "finish_reason": delta.finish_reason,
            "stop_reason": delta.stop_reason, "token_ids": delta.token_ids,
            "routed_experts": None, "sampling_mask": None,
            "weight_versions": state.weight_versions(choice_index) if finished else None}
        if self.text_mode:
            choice["text"] = delta.text
        choice["logprobs"] = delta.logprobs
        body: dict[str, Any] = {"request_id": self.prepared.request_id, "usage": None}
        if self._prompt_ids is not None:
            body["prompt_token_ids"], self._prompt_ids = self._prompt_ids, None
        body["output_mode"] = self.mode
        body["choices"] = [choice]
        if self.prepared.continuous_usage:
            prompt = state.choices[choice_index].prompt_tokens
            body["usage"] = {"prompt_tokens": prompt,
                             "total_tokens": prompt + delta.completion_tokens,
                             "completion_tokens": delta.completion_tokens,
                             "prompt_tokens_details": None, "completion_tokens_details": None}
        return frame(body)

    def final_chunks(self, state: GenerateState) -> bytes:
        """The usage chunk (its nulls left out) when requested, then ``[DONE]``."""
        if not self.prepared.include_usage:
            return DONE
        prompt, completion = state.prompt_tokens(), state.completion_tokens()
        usage: dict[str, Any] = {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                                 "completion_tokens": completion}
        details = state.prompt_tokens_details()
        if details is not None:
            usage["prompt_tokens_details"] = {k: v for k, v in details.items() if v is not None}
        return frame({"request_id": self.prepared.request_id, "usage": usage,
                      "output_mode": self.mode, "choices": []}) + DONE


def render_generate_response(prepared: PreparedRequest, state: GenerateState) -> bytes:
    """The non-streamed body (every field, nulls included)."""
    text_mode = state.text_mode
    tokenizer = state.logprobs_tokenizer()
    choices = []
    for i, c in enumerate(state.choices):
        ids = list(c.token_ids)
        choice: dict[str, Any] = {
            "index": c.choice.index, "finish_reason": c.finish_reason or "stop",
            "stop_reason": c.stop_reason, "token_ids": ids, "routed_experts": None,
            "sampling_mask": None, "weight_versions": state.weight_versions(i)}
        if text_mode:
            choice["text"] = c.final_text()
        choice["logprobs"] = (None if prepared.logprobs is None else
                              generate_logprobs(ids, c.positions, prepared.logprobs, tokenizer,
                                                py_floats=True))
        choices.append(choice)
    return dumps({
        "request_id": prepared.request_id, "model": prepared.model, "created": prepared.created,
        "usage": state.usage(), "prompt_logprobs": _prompt_logprobs(state),
        "prompt_token_id_logprobs": None,
        "prompt_token_ids": (prepared.choices[0].prompt_token_ids
                             if prepared.return_token_ids else None),
        "mm_placeholders": None, "metrics": None,
        "kv_transfer_params": state.kv_transfer_params,
        "ec_transfer_params": state.ec_transfer_params,
        "output_mode": prepared.output_mode, "choices": choices})


def _prompt_logprobs(state: GenerateState) -> list | None:
    """The request's prompt logprobs (``decoded_token`` null when ``detokenize`` is off)."""
    positions = next((c.prompt_positions for c in state.choices
                      if c.prompt_positions is not None), None)
    if positions is None:
        return None
    out = prompt_logprobs_json(positions, state.ctx.tokenizer)
    if not state.detokenize:
        for row in out:
            for item in (row or {}).values():
                item["decoded_token"] = None
    return out
