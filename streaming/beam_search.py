"""Beam search bookkeeping, as vLLM 0.32's Python frontend does it (``use_beam_search``).

vLLM runs beam search in its frontend, not in the engine: every step sends each live beam's
whole token sequence (prompt + tokens so far) as a one-token engine request asking for
``2 × width`` logprobs, then keeps the ``width`` best continuations by cumulative logprob.
This module is the pure part of that loop (no engine, no I/O): ``BeamSearch`` holds one
prompt's beams and takes each step's logprob positions; ``streaming.beam_body`` drives it
against the engines.

The rules reproduced (vLLM 0.32 ``entrypoints/generate/beam_search``):
- each candidate of a step is a (beam, token) pair from that beam's logprob position (the
  engine's sampled token first, then its top ``2 × width``); its score is the beam's cumulative
  logprob plus the token's;
- a candidate whose token is the tokenizer's EOS (unless ``ignore_eos``) is finished at once
  (``stop``, stop reason the EOS id) and kept aside; the EOS id stays in its tokens only with
  ``include_stop_str_in_output``;
- the other candidates are ranked by score (numpy's argsort/argpartition, as vLLM, so ties
  fall the same way) and the best ``width`` become the next step's beams;
- it runs ``max_tokens`` steps (no early stopping: vLLM 0.32 has none), or until no beam
  is left, or until a step request was aborted (every beam then ends ``abort``);
- at the end, finished and live beams are sorted by ``cum_logprob / len ** length_penalty``
  (``len`` counts the prompt's tokens too, and not a final EOS) and the best ``width`` kept.

Runs on: whichever thread owns the search (``streaming.beam_body``: the HTTP hub); not
thread-safe, no shared state.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: One step's logprobs of one beam: ``{token_id: (logprob, rank)}`` in the engine's order
#: (``streaming.logprobs.Position``).
Position = dict


@dataclass(frozen=True)
class BeamSettings:
    """What a search needs of the request (vLLM's ``BeamSearchParams``).

    Attributes:
        width: beams kept per step and returned (the request's ``n``).
        max_tokens: steps to run (the request's token budget for this prompt).
        length_penalty: the exponent of the length in the final score.
        ignore_eos: EOS is a token like any other.
        include_stop_str_in_output: a beam finished by EOS keeps the EOS id in its tokens.
        eos_token_id: the tokenizer's EOS id (None: the tokenizer has none).
    """

    width: int
    max_tokens: int
    length_penalty: float = 1.0
    ignore_eos: bool = False
    include_stop_str_in_output: bool = False
    eos_token_id: int | None = None


@dataclass
class Beam:
    """One sequence: the prompt plus the tokens chosen so far.

    Attributes:
        tokens: prompt token ids followed by the generated ones (the next step's prompt).
        cum_logprob: the sum of the chosen tokens' logprobs.
        positions: each step's whole logprob position (a finished-by-EOS beam has one more
            position than generated tokens when the EOS id is not kept).
        finish_reason: "stop" (EOS), "abort", or None (ran out of steps: "length").
        stop_reason: the EOS id for an EOS finish, else None.
    """

    tokens: list[int]
    cum_logprob: float = 0.0
    positions: list[Position] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: int | None = None


def beam_score(tokens: list[int], cum_logprob: float, eos_token_id: int | None,
               length_penalty: float) -> float:
    """The final ranking score: cumulative logprob over the length (a trailing EOS not
    counted; at least 1) to the power ``length_penalty`` (Hugging Face's formula)."""
    length = len(tokens)
    if tokens and tokens[-1] == eos_token_id:
        length -= 1
    return cum_logprob / (max(length, 1) ** length_penalty)


class BeamSearch:
    """One prompt's beam search state.

    Args:
        prompt_token_ids: the prompt as sent to the engines.
        settings: the search's parameters.
    """

    def __init__(self, prompt_token_ids: list[int], settings: BeamSettings) -> None:
        self.settings = settings
        self.prompt_len = len(prompt_token_ids)
        #: the beams the next step extends
        self.live: list[Beam] = [Beam(list(prompt_token_ids))]
        #: beams finished by EOS
        self.completed: list[Beam] = []
        self.steps = 0
        self.aborted = False

    @property
    def done(self) -> bool:
        """No step left to run."""
        return self.aborted or not self.live or self.steps >= self.settings.max_tokens

    def abort(self) -> None:
        """A step request was aborted: every live beam ends with ``abort``, no more steps."""
        for beam in self.live:
            beam.finish_reason = "abort"
        self.aborted = True

    def advance(self, positions: list[Position | None]) -> None:
        """Apply one step: ``positions[i]`` is live beam ``i``'s logprob position (None when the
        engine returned none: the beam has no continuation)."""
        s = self.settings
        eos = None if s.ignore_eos else s.eos_token_id
        scores: list[float] = []
        candidates: list[tuple[int, Beam, Position]] = []
        for beam, position in zip(self.live, positions):
            if position is None:
                continue
            for token_id, (logprob, _rank) in position.items():
                score = beam.cum_logprob + logprob
                if eos is not None and token_id == eos:
                    tokens = beam.tokens + [eos] if s.include_stop_str_in_output else beam.tokens
                    self.completed.append(Beam(tokens, score, beam.positions + [position],
                                               "stop", eos))
                else:
                    scores.append(score)
                    candidates.append((token_id, beam, position))
        self.steps += 1
        self.live = [Beam(beam.tokens + [token_id], scores[i], beam.positions + [position])
                     for i in _best_indices(scores, s.width)
                     for token_id, beam, position in (candidates[i],)]

    def best(self) -> list[Beam]:
        """The returned beams, best first (call once the search is ``done``)."""
        s = self.settings
        beams = self.completed + self.live
        ranked = sorted(beams, key=lambda b: beam_score(b.tokens, b.cum_logprob,
                                                        s.eos_token_id, s.length_penalty),
                        reverse=True)
        return ranked[:s.width]

    def output_ids(self, beam: Beam) -> list[int]:
        """A returned beam's generated token ids (the EOS id included when kept)."""
        return beam.tokens[self.prompt_len:]

    def text_ids(self, beam: Beam) -> list[int]:
        """The ids its text is decoded from: the generated ones without a trailing EOS."""
        ids = beam.tokens[self.prompt_len:]
        if (not self.settings.ignore_eos and beam.tokens
                and beam.tokens[-1] == self.settings.eos_token_id):
            ids = beam.tokens[self.prompt_len:-1]
        return ids


def _best_indices(scores: list[float], width: int) -> list[int]:
    """Indices of the ``width`` highest scores, highest first, ordered among equal scores as
    vLLM's numpy calls order them (a full argsort when they all fit, else argpartition then
    argsort of the kept ones)."""
    values = np.fromiter(scores, dtype=np.float64, count=len(scores))
    if len(scores) <= width:
        order = np.argsort(-values)
    else:
        order = np.argpartition(-values, width - 1)[:width]
        order = order[np.argsort(-values[order])]
    return [int(i) for i in order]
