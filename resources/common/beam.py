"""Beam search (``use_beam_search``) for completions and chat: the request side and the answer.

vLLM 0.32 turns a beam-search request into ``BeamSearchParams`` instead of SamplingParams, so
none of the sampling checks run and none of the sampling fields (stop strings, penalties,
``top_p``, seeds, structured outputs, ...) apply: only ``n`` (the beam width), the token budget,
``temperature``, ``length_penalty``, ``ignore_eos``, ``include_stop_str_in_output`` and
``skip_special_tokens`` do. Its one-token step request is a fresh SamplingParams (``2 × n``
logprobs, no detokenization) whose checks (temperature, the logprob limit) are vLLM's usual ones.

Here: ``beam_plan`` (those checks, in vLLM's order and wording, and the step's wire
SamplingParams), and ``beam_state`` (the finished searches as a ``RequestState`` the endpoint's
renderer writes, one choice per returned beam, as vLLM's serving layer writes them).

Called by: ``resources.completions.convert``, ``resources.chat.convert`` (plans) and
``resources.generate_resource`` (the answer).
Runs on: plans on request-pool threads; ``beam_state`` on the HTTP hub.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from base.errors import InvalidRequest
from engine.protocol import SamplingParams
from engine.request_stats import RequestTiming
from runtime.serving_context import ServingContext
from streaming.output import RequestState
from streaming.prepared import PreparedChoice, PreparedRequest
from resources.common.sampling_rules import SamplingValues, check_engine_side, settle_like_vllm
from streaming.beam_search import Beam, BeamSearch, BeamSettings


@dataclass(frozen=True)
class BeamPlan:
    """A beam-search request: per prompt its search settings, and the shared step request.

    Attributes:
        settings: one ``BeamSettings`` per prompt (the budgets differ by prompt length).
        step_params: the one-token step request's wire SamplingParams.
        skip_special_tokens: how the returned beams' text is decoded.
    """

    settings: list[BeamSettings]
    step_params: SamplingParams
    skip_special_tokens: bool = True


class BeamFields(Protocol):
    """What ``beam_plan`` reads of a request (completions and chat requests)."""

    temperature: float | None
    length_penalty: float
    ignore_eos: bool
    include_stop_str_in_output: bool
    skip_special_tokens: bool


def beam_plan(f: Any, ctx: ServingContext, n: int, budgets: list[int]) -> BeamPlan:
    """Check a beam-search request as vLLM does after tokenization and plan its searches.

    Args:
        f: the parsed request (``BeamFields``).
        n: the beam width (the request's ``n``).
        budgets: each prompt's token budget (``max_tokens_for``).

    Raises:
        InvalidRequest: the beam width out of range ("beam_width must be ..."), then the step
            request's checks (temperature; ``2 × n`` logprobs over ``--max-logprobs``).
    """
    if n < 1:
        raise InvalidRequest(f"beam_width must be at least 1, got {n}.")
    if n > ctx.max_n:
        raise InvalidRequest(f"beam_width must be at most {ctx.max_n}, got {n}. To increase "
                             "this limit, set the VLLM_MAX_N_SEQUENCES environment variable.")
    temperature = f.temperature
    if temperature is None:
        temperature = ctx.generation_defaults.get("temperature", 1.0)
    step = SamplingValues(
        presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0,
        temperature=float(temperature), top_p=1.0, top_k=0, min_p=0.0, max_tokens=1,
        min_tokens=0, logprobs=2 * n, prompt_logprobs=None, stop=[], stop_token_ids=[],
        bad_words=[], logit_bias=None, allowed_token_ids=None, thinking_token_budget=None,
        detokenize=False)
    settle_like_vllm(step, 1, ctx)
    check_engine_side(step, ctx)
    eos = ctx.tokenizer.eos_token_id
    stop_ids = [e for e in ctx.generation_eos_ids if e != eos]
    all_stop = sorted({*stop_ids, *(() if eos is None else (eos,))})
    wire = SamplingParams(
        temperature=step.temperature, watermarking=False, top_p=step.top_p, top_k=step.top_k,
        min_p=step.min_p, stop_token_ids=stop_ids, max_tokens=1, logprobs=2 * n,
        detokenize=False, eos_token_id=eos, all_stop_token_ids=all_stop)
    settings = [BeamSettings(width=n, max_tokens=budget, length_penalty=f.length_penalty,
                             ignore_eos=f.ignore_eos,
                             include_stop_str_in_output=f.include_stop_str_in_output,
                             eos_token_id=eos) for budget in budgets]
    return BeamPlan(settings, wire, f.skip_special_tokens)


class BeamChoiceState:
    """One returned beam as the renderers read a choice (``streaming.output.ChoiceState``'s
    attributes): text decoded whole from its tokens (vLLM decodes beams with
    ``tokenizer.decode``), no prompt logprobs, no cache figures."""

    def __init__(self, choice: PreparedChoice, text: str, token_ids: list[int], beam: Beam
                 ) -> None:
        self.choice = choice
        self.prompt_tokens = len(choice.prompt_token_ids)
        self._text = text
        self.token_ids = token_ids
        self.positions = beam.positions[:len(token_ids)]
        self.prompt_positions = None
        self.finish_reason = beam.finish_reason or "length"
        self.stop_reason = beam.stop_reason
        self.num_cached_tokens = 0
        self.num_cache_creation_tokens = 0
        self.started = True

    @property
    def finished(self) -> bool:
        return True

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids)

    def final_text(self) -> str:
        return self._text


class BeamRequestState(RequestState):
    """A finished beam search as the renderers read a request: no ``prompt_tokens_details``
    (vLLM's beam output carries no cache count) and per-request metrics without timings (all
    null, as vLLM writes them for a beam answer)."""

    def prompt_tokens_details(self) -> dict | None:
        return None


def beam_state(prepared: PreparedRequest, ctx: ServingContext,
               searches: list[BeamSearch]) -> BeamRequestState:
    """The request state of finished searches: each prompt's best beams, in order, numbered
    one after the other across prompts (vLLM's ``index=len(choices)``)."""
    tokenizer = ctx.tokenizer
    skip_special = prepared.beam.skip_special_tokens
    choices: list[PreparedChoice] = []
    states: list[BeamChoiceState] = []
    for pi, (search, prompt) in enumerate(zip(searches, _prompts(prepared))):
        for beam in search.best():
            choice = replace(prompt, index=len(choices), prompt_index=pi)
            text = tokenizer.decode(search.text_ids(beam), skip_special)
            choices.append(choice)
            states.append(BeamChoiceState(choice, text, search.output_ids(beam), beam))
    done = replace(prepared, choices=choices)
    state = BeamRequestState(done, ctx, states)
    state.timings = [RequestTiming(0.0)]
    return state


def _prompts(prepared: PreparedRequest) -> list[PreparedChoice]:
    """The first choice of each prompt (a beam-search request has one choice per prompt)."""
    seen: dict[int, PreparedChoice] = {}
    for c in prepared.choices:
        seen.setdefault(c.prompt_index, c)
    return [seen[i] for i in sorted(seen)]
