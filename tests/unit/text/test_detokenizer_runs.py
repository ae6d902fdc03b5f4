"""Several new tokens at once (a response that fell behind takes a run of steps as one output)
give exactly the text that stepping them one at a time gives, in the same deltas."""
from __future__ import annotations

import random

import pytest

from text.detokenizer import IncrementalDetokenizer

from tests.unit.text.test_stream_prefill import _random_ids


@pytest.fixture(params=["byte-level", "decode-stream"])
def tok(request, tok_fast, tok_stream):
    """Each test on both ways of making text: the byte-level tables (text/byte_level.py) and
    the DecodeStream."""
    return tok_fast if request.param == "byte-level" else tok_stream


def _deltas(tok, prompt, runs, sst, one_at_a_time):
    det = IncrementalDetokenizer(tok, prompt, skip_special_tokens=sst)
    deltas = []
    for run in runs:
        if one_at_a_time:
            for token in run:
                det.update([token], False)
        else:
            det.update(run, False)
        deltas.append(det.get_next_output_text(False, True))
    deltas.append(det.get_next_output_text(True, True))
    return deltas, det.output_text, det.num_output_tokens


@pytest.mark.parametrize("sst", [True, False])
def test_a_run_of_tokens_gives_the_deltas_of_its_tokens_one_by_one(tok, sst):
    rng = random.Random(11 if sst else 12)
    at_once = 0
    for _ in range(300):
        prompt = _random_ids(rng, rng.randrange(1, 100))
        runs = [_random_ids(rng, rng.randrange(1, 40)) for _ in range(rng.randrange(1, 6))]
        assert (_deltas(tok, prompt, runs, sst, False)
                == _deltas(tok, prompt, runs, sst, True)), (prompt, runs)
        at_once += sum(len(run) > 1 for run in runs)
    assert at_once > 500


def test_a_run_of_natural_text_is_stepped_at_once(tok_stream):
    tok = tok_stream
    ids = tok.encode(" The quick brown fox jumps over the lazy dog, 東日本 😀 again." * 5, False)
    runs = [ids[i:i + 17] for i in range(0, len(ids), 17)]
    assert (_deltas(tok, [1], runs, True, False) == _deltas(tok, [1], runs, True, True))
    det = IncrementalDetokenizer(tok, [1])
    calls = []
    steps = det._steps
    step = steps._stream.step
    steps._stream = type("Counting", (), {"step": lambda self, hf, ids: calls.append(ids) or step(hf, ids)})()
    det.update(ids[:17], False)
    assert len(calls) < 17  # the head went through in one call


def test_an_id_the_stream_cannot_take_inside_a_run_is_skipped_as_one_at_a_time(tok):
    one = IncrementalDetokenizer(tok, [1])
    for token in (3795, -1, 115370):
        one.update([token], False)
    run = IncrementalDetokenizer(tok, [1])
    run.update([3795, -1, 115370], False)
    assert run.output_text == one.output_text == ":** нельзя"
    assert run.num_output_tokens == one.num_output_tokens == 3


@pytest.mark.parametrize("sst", [True, False])
def test_the_remembered_ascii_ends_are_what_a_decode_says(tok_stream, sst):
    tok = tok_stream
    rng = random.Random(13)
    det = IncrementalDetokenizer(tok, [1], skip_special_tokens=sst)
    for _ in range(200):
        det._steps._run_head(_random_ids(rng, rng.randrange(2, 8)))
    known = tok.ascii_ends[sst]
    remembered = [i for i, answer in enumerate(known) if answer]
    assert len(remembered) > 100
    for token_id in remembered:
        text = tok.hf.decode([token_id], skip_special_tokens=sst)
        assert known[token_id] == (2 if text and text[-1] < "\x80" else 1), token_id
