"""Per-request output state: engine deltas -> text deltas, finish/stop reasons, logprobs, usage.

Owns what vLLM's OutputProcessor and serving layer keep per request choice: the incremental
detokenizer (text, stop strings, hold-back), the accepted token ids, logprob positions, the
finish and stop reasons, and whether the engine must be told to abort (a stop *string* matched
while the engine still runs the request, docs/engine-protocol.md §3.4).

The generation resource (``resources/generate_resource.py``) creates one ``RequestState`` per ``PreparedRequest`` and feeds each
``EngineCoreOutput`` of choice ``i`` to ``add(i, output)``; the renderers read the returned
``ChoiceDelta`` and the state (usage, accumulated text) to write bytes.

Runs on: the HTTP hub (each ``add`` is microseconds: one DecodeStream step per token).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from engine.protocol import FinishReason, finish_reason_str
from base.errors import engine_request_error
from runtime.serving_context import ServingContext
from streaming.logprobs import (Namer, Position, chat_logprobs, completion_logprobs,
                                       positions_from)
from streaming.prepared import PreparedChoice, PreparedRequest
from text.detokenizer import IncrementalDetokenizer


@dataclass(slots=True)
class ChoiceDelta:
    """What one engine output changed for one choice (stream mode: the chunk's content).

    Attributes:
        index: the choice index.
        text: new text (stream: after hold-back; final-only: "" until finished).
        token_ids: new output token ids (after a stop-string cut).
        logprobs: the chunk's logprobs object in the endpoint's OpenAI shape, or None.
        finish_reason: "stop" / "length" / "abort" / "repetition", or None while running.
        stop_reason: the matched stop string, the stop token id, "repetition_detected" or None.
        abort_engine: a stop string finished the choice while the engine still runs it.
        first: the first delta of this choice (echo and ``prompt_token_ids`` go here).
        completion_tokens: output tokens of this choice so far (continuous usage).
    """

    index: int
    text: str
    token_ids: list[int]
    logprobs: dict | None
    finish_reason: str | None
    stop_reason: int | str | None
    abort_engine: bool
    first: bool
    completion_tokens: int


class OutputState:
    """What a body fills with engine outputs (``streaming.body``): ``RequestState`` below for
    generation, ``resources.pooled.output.PooledState`` for pooling. A base class, not a
    ``Protocol``: the implementations subclass it."""

    @property
    def all_finished(self) -> bool:
        """Every choice has finished."""
        raise NotImplementedError

    def add(self, index: int, output: Any, frames: Sequence[Any] | None = None
            ) -> ChoiceDelta | None:
        """Apply one engine output to choice ``index``; None when there is nothing to show.

        Raises:
            ApiError: the engine failed the request (finish reason ``error``)."""
        raise NotImplementedError


class ChoiceState:
    """One choice: its detokenizer plus what the renderers need at the end."""

    def __init__(self, choice: PreparedChoice, ctx: ServingContext) -> None:
        self.choice = choice
        #: the prompt's length (continuous usage reads it in every chunk)
        self.prompt_tokens = len(choice.prompt_token_ids)
        self.detokenizer = IncrementalDetokenizer(
            ctx.tokenizer, choice.prompt_token_ids,
            skip_special_tokens=choice.skip_special_tokens,
            spaces_between_special_tokens=choice.spaces_between_special_tokens,
            stop=choice.stop, include_stop_str_in_output=choice.include_stop_str_in_output,
            min_tokens=choice.min_tokens)
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None
        self.positions: list[Position] = []  # sample logprobs (final-only mode keeps them all)
        self.prompt_positions: list[Position | None] | None = None
        self.started = False
        self.text_offset = 0  # completions logprobs text_offset carried across chunks
        self.num_cached_tokens = 0
        self.num_cache_creation_tokens = 0
        # Batch this many tokens per chunk: the server's --stream-interval, raised (never
        # lowered) by the request's own, as vLLM's output processor clamps it.
        requested = choice.sampling_params.stream_interval
        self.stream_interval = max(requested or 1, ctx.stream_interval)
        self.sent_tokens = 0
        self.pending: list[Position] = []  # stream logprobs not yet sent

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def token_ids(self) -> list[int]:
        return self.detokenizer.token_ids

    @property
    def num_output_tokens(self) -> int:
        return self.detokenizer.num_output_tokens

    def final_text(self) -> str:
        """The whole output text (non-streamed bodies)."""
        return self.detokenizer.get_next_output_text(True, False)


def _interval_held(state: ChoiceState, new_positions: list[Position], finished: bool
                   ) -> tuple[list[int], list[Position]] | None:
    """With ``stream_interval`` above 1: None while this output's tokens wait for later ones,
    else the tokens and logprob positions held so far, now due. vLLM sends the first step, the
    finishing one, and then every ``stream_interval`` tokens."""
    state.pending.extend(new_positions)
    token_ids = state.token_ids
    if not (finished or state.sent_tokens == 0
            or len(token_ids) - state.sent_tokens >= state.stream_interval):
        return None
    due = token_ids[state.sent_tokens:]
    state.sent_tokens = len(token_ids)
    positions, state.pending = state.pending, []
    return due, positions


def _finish(state: ChoiceState, code: int | None, stop_string: str | None,
            stop_reason: int | str | None) -> tuple[str | None, int | str | None, bool]:
    """How an output that finished the choice (the engine's ``code``, or a matched stop
    string) finishes it: the finish and stop reasons (also kept on ``state``), and whether the
    engine must still be told to stop."""
    finish_reason = None if code is None else finish_reason_str(code)
    abort_engine = False
    if stop_string is not None:
        abort_engine = code is None
        finish_reason, stop_reason = "stop", stop_string
    if finish_reason is not None:
        state.finish_reason, state.stop_reason = finish_reason, stop_reason
    return finish_reason, stop_reason, abort_engine


class RequestState(OutputState):
    """All choices of one request.

    Args:
        prepared: the converted request.
        ctx: the serving context (tokenizer).
    """

    def __init__(self, prepared: PreparedRequest, ctx: ServingContext,
                 choices: list | None = None) -> None:
        self.prepared = prepared
        self.ctx = ctx
        #: one state per choice; ``choices`` given: finished ones made elsewhere (beam search)
        self.choices = ([ChoiceState(c, ctx) for c in prepared.choices] if choices is None
                        else choices)
        self.namer = Namer(ctx.tokenizer, prepared.return_tokens_as_token_ids)
        # The engine's KV/EC connector results, as vLLM answers them: those of the first
        # prompt's final output (its last sample to finish); None without a connector.
        self.kv_transfer_params: dict | None = None
        self.ec_transfer_params: dict | None = None
        #: the engine requests' timing (``engine.request_stats``), for per-request metrics
        self.timings: list = []
        # PERF: a streamed chat reads it in every chunk (continuous usage); the prompts never
        # change. Each prompt counted once, not once per sample.
        seen: dict[int, int] = {}
        for c in prepared.choices:
            seen.setdefault(c.prompt_index, len(c.prompt_token_ids))
        self._prompt_tokens = sum(seen.values())

    @property
    def all_finished(self) -> bool:
        # PERF: a loop over the attribute, not all() over a generator of properties: read
        # several times per chunk (0.37 -> 0.05 us for one choice).
        for c in self.choices:
            if c.finish_reason is None:
                return False
        return True

    def add(self, choice_index: int, output: Any, frames: Sequence[Any] | None = None
            ) -> ChoiceDelta | None:
        """Apply one ``EngineCoreOutput`` to choice ``choice_index`` (``frames``: the multipart
        message it came in; logprob arrays may live in its aux frames).

        Returns:
            The delta, or None when there is nothing to send: the choice had already finished
            (late outputs are dropped), or ``stream_interval`` holds these tokens back.

        Raises:
            ApiError: the engine finished the request with ERROR (``engine_request_error``: a 400,
                503 or vLLM's "Internal server error" 500; the driver turns it into that status or
                an SSE error event, docs/text-parity.md §8.3).
        """
        state = self.choices[choice_index]
        if state.finish_reason is not None:
            return None
        code = output.finish_reason
        if code is None and state.started and output.new_prompt_logprobs_tensors is None:
            # PERF: an output in the middle of a generation carries nothing beside its tokens
            # (what ``_take_side_fields`` reads comes with the first or the last one).
            first = False
        else:
            if code == FinishReason.ERROR:
                raise engine_request_error(getattr(output, "error", None))
            first = self._take_side_fields(state, output, frames)
        choice = state.choice
        detokenizer = state.detokenizer
        token_ids = detokenizer.token_ids  # the live list: ``update`` changes it in place
        before = len(token_ids)
        stop_string = detokenizer.update(output.new_token_ids,
                                         code is not None and code == FinishReason.STOP)
        new_ids = token_ids[before:]
        if code is None and stop_string is None:
            finish_reason, stop_reason, abort_engine = None, output.stop_reason, False
        else:
            finish_reason, stop_reason, abort_engine = _finish(state, code, stop_string,
                                                               output.stop_reason)
        finished = finish_reason is not None
        new_positions: list[Position] = []
        if output.new_logprobs is not None and choice.logprobs is not None:
            new_positions = positions_from(output.new_logprobs, choice.logprobs,
                                           frames)[:len(new_ids)]

        if not self.prepared.stream:
            state.positions.extend(new_positions)
            return ChoiceDelta(choice.index, "", new_ids, None, finish_reason, stop_reason,
                               abort_engine, first, len(token_ids))
        if state.stream_interval > 1:
            held = _interval_held(state, new_positions, finished)
            if held is None:
                return None
            new_ids, new_positions = held
        text = detokenizer.get_next_output_text(finished, True)
        logprobs = (None if self.prepared.logprobs is None
                    else self._stream_logprobs(state, new_ids, new_positions, first))
        return ChoiceDelta(choice.index, text, new_ids, logprobs, finish_reason, stop_reason,
                           abort_engine, first, len(token_ids))

    def _take_side_fields(self, state: ChoiceState, output: Any,
                          frames: Sequence[Any] | None) -> bool:
        """What an output carries beside its tokens: cache figures and prompt logprobs (first
        output), the transfer results (the first prompt's final output, as vLLM answers them).
        Returns whether this is the choice's first output."""
        if output.finish_reason is not None and state.choice.prompt_index == 0:
            self.kv_transfer_params = output.kv_transfer_params
            self.ec_transfer_params = output.ec_transfer_params
        first = not state.started
        state.started = True
        if first and output.prefill_stats is not None:
            state.num_cached_tokens = output.prefill_stats.num_cached_tokens
            state.num_cache_creation_tokens = output.prefill_stats.num_cache_creation_tokens
        choice = state.choice
        if output.new_prompt_logprobs_tensors is not None and choice.prompt_logprobs is not None:
            state.prompt_positions = [None] + positions_from(
                output.new_prompt_logprobs_tensors, choice.prompt_logprobs, frames)
        return first

    def _stream_logprobs(self, state: ChoiceState, ids: list[int], positions: list[Position],
                         first: bool) -> dict | None:
        prepared = self.prepared
        if prepared.logprobs is None:
            return None
        if prepared.kind == "chat":
            return chat_logprobs(ids, positions, prepared.logprobs, self.namer, stream=True)
        if prepared.echo and first:
            # The echoed prompt's logprobs precede the first output token's (or replace them
            # when echo runs without generation).
            prompt_ids = state.choice.prompt_token_ids
            prompt_pos = state.prompt_positions or [None] * len(prompt_ids)
            if prepared.echo_only:
                ids, positions = prompt_ids, prompt_pos
            else:
                ids, positions = [*prompt_ids, *ids], [*prompt_pos, *positions]
        body, state.text_offset = completion_logprobs(ids, positions, prepared.logprobs,
                                                      self.namer, state.text_offset)
        return body

    # -- usage ----------------------------------------------------------------------------------

    def prompt_tokens(self) -> int:
        """Prompt tokens, each prompt counted once (not once per sample)."""
        return self._prompt_tokens

    def completion_tokens(self) -> int:
        return sum(c.num_output_tokens for c in self.choices)

    def usage(self) -> dict[str, Any]:
        """The non-streamed usage object, keys in vLLM's order (docs/text-parity.md §5.1)."""
        prompt, completion = self.prompt_tokens(), self.completion_tokens()
        return {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                "completion_tokens": completion,
                "prompt_tokens_details": self.prompt_tokens_details(),
                "completion_tokens_details": None}

    def prompt_tokens_details(self) -> dict | None:
        """``{"cached_tokens", "created_cache_tokens", "multimodal_tokens"}`` when enabled."""
        if not self.ctx.enable_prompt_tokens_details or not self.choices:
            return None
        # NOTE: vLLM reports the cache counts of one engine request, not a sum.
        source = self.choices[-1] if self.prepared.kind == "completion" else self.choices[0]
        created = (source.num_cache_creation_tokens if self.prepared.kind == "chat" else None)
        return {"cached_tokens": source.num_cached_tokens, "created_cache_tokens": created,
                "multimodal_tokens": None}
