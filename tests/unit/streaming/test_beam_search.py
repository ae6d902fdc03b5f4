"""Beam-search bookkeeping (``streaming.beam_search``): candidates, EOS, steps and scores, as
vLLM 0.32's frontend keeps them."""
from __future__ import annotations

import pytest

from streaming.beam_search import Beam, BeamSearch, BeamSettings, beam_score

EOS = 2
PROMPT = [1, 100]


def search(width: int = 2, max_tokens: int = 4, **kw) -> BeamSearch:
    return BeamSearch(PROMPT, BeamSettings(width=width, max_tokens=max_tokens, eos_token_id=EOS,
                                           **kw))


def pos(*entries: tuple[int, float]) -> dict:
    """A logprob position: the first entry is the engine's sampled token (rank 1)."""
    return {tid: (lp, rank) for rank, (tid, lp) in enumerate(entries, start=1)}


@pytest.mark.parametrize("tokens, cum, penalty, expected", [
    ([1, 2, 3, 4], -2.0, 1.0, -0.5),
    ([1, 2, 3, 4], -2.0, 0.0, -2.0),
    ([1, 2, 3, 4], -8.0, 2.0, -0.5),
    ([1, 5, 6, EOS], -3.0, 1.0, -1.0),   # a trailing EOS is not counted
    ([EOS], -1.0, 1.0, -1.0),            # length at least 1
])
def test_score_divides_by_the_length_to_the_penalty(tokens, cum, penalty, expected):
    assert beam_score(tokens, cum, EOS, penalty) == pytest.approx(expected)


def test_a_step_keeps_the_best_width_candidates_and_finishes_eos_apart():
    s = search(width=2)
    s.advance([pos((5, -0.1), (EOS, -0.3), (6, -0.5), (7, -2.0))])
    assert [b.tokens for b in s.live] == [PROMPT + [5], PROMPT + [6]]
    assert [b.cum_logprob for b in s.live] == [-0.1, -0.5]
    assert len(s.completed) == 1
    done = s.completed[0]
    assert done.tokens == PROMPT            # the EOS id is not kept by default
    assert (done.finish_reason, done.stop_reason, done.cum_logprob) == ("stop", EOS, -0.3)
    assert len(done.positions) == 1         # its EOS position is kept all the same
    assert s.text_ids(done) == [] and s.output_ids(done) == []


def test_candidates_of_all_beams_compete_on_cumulative_logprob():
    s = search(width=2)
    s.advance([pos((5, -0.1), (6, -1.0), (7, -3.0), (8, -4.0))])
    s.advance([pos((9, -2.0), (10, -2.5), (11, -3.0), (12, -3.5)),    # beam 5: -2.1, -2.6, ...
               pos((13, -0.2), (14, -0.3), (15, -5.0), (16, -6.0))])  # beam 6: -1.2, -1.3
    assert [b.tokens[len(PROMPT):] for b in s.live] == [[6, 13], [6, 14]]
    assert [b.cum_logprob for b in s.live] == pytest.approx([-1.2, -1.3])
    assert all(len(b.positions) == 2 for b in s.live)


def test_include_stop_str_keeps_the_eos_id_in_the_tokens_not_in_the_text():
    s = search(width=1, include_stop_str_in_output=True)
    s.advance([pos((5, -0.1), (6, -0.2))])
    s.advance([pos((EOS, -0.05), (7, -3.0))])
    done = s.completed[0]
    assert done.tokens == PROMPT + [5, EOS]
    assert s.output_ids(done) == [5, EOS]
    assert s.text_ids(done) == [5]


def test_ignore_eos_makes_eos_an_ordinary_candidate():
    s = search(width=1, ignore_eos=True)
    s.advance([pos((EOS, -0.1), (6, -0.2))])
    assert s.completed == []
    assert s.live[0].tokens == PROMPT + [EOS]
    assert s.text_ids(s.live[0]) == [EOS]


def test_it_runs_max_tokens_steps_without_early_stopping():
    s = search(width=1, max_tokens=3)
    for step in range(3):
        assert not s.done
        # An EOS better than every beam finishes one beam per step; the search goes on.
        s.advance([pos((EOS, -0.01), (10 + step, -0.5))])
    assert s.done
    assert len(s.completed) == 3
    best = s.best()
    assert len(best) == 1 and best[0].finish_reason == "stop"


def test_length_penalty_decides_between_short_finished_and_long_beams():
    def run(penalty: float) -> Beam:
        s = search(width=1, max_tokens=3, length_penalty=penalty)
        s.advance([pos((5, -1.0), (EOS, -1.2))])     # finished: cum -1.2, length 2
        s.advance([pos((6, -0.3))])
        s.advance([pos((7, -0.3))])                  # live: cum -1.6, length 5
        return s.best()[0]
    # penalty 1: -1.2 / 2 = -0.6 vs -1.6 / 5 = -0.32: the long beam wins
    assert run(1.0).tokens == PROMPT + [5, 6, 7]
    # penalty 0: -1.2 vs -1.6: the finished one wins
    assert run(0.0).finish_reason == "stop"


def test_best_returns_at_most_width_and_no_beam_left_ends_the_search():
    s = search(width=3, max_tokens=5)
    s.advance([pos((EOS, -0.1))])
    assert s.done and s.live == []
    best = s.best()
    assert [b.finish_reason for b in best] == ["stop"]


def test_an_aborted_step_ends_every_live_beam_with_abort():
    s = search(width=2)
    s.advance([pos((5, -0.1), (6, -0.2))])
    s.abort()
    assert s.done
    assert {b.finish_reason for b in s.best()} == {"abort"}


def test_a_beam_without_logprobs_has_no_continuation():
    s = search(width=2)
    s.advance([None])
    assert s.done and s.live == []


def test_zero_steps_return_the_prompt_alone():
    s = search(width=2, max_tokens=0)
    assert s.done
    (only,) = s.best()
    assert s.output_ids(only) == [] and only.finish_reason is None
