"""A short prompt tail pre-fills the decode stream only when that changes nothing."""
from __future__ import annotations

import random

import pytest

from text.detokenizer import PREFILL_WINDOW, IncrementalDetokenizer, stream_prefill


@pytest.fixture
def tok(tok_stream):
    """The pre-fill is the DecodeStream's (the byte-level path needs none)."""
    return tok_stream


def _random_ids(rng: random.Random, n: int) -> list[int]:
    # 40-50% raw-byte tokens (ids 1000-1255) make broken UTF-8 common; a few specials too.
    out = []
    for _ in range(n):
        r = rng.random()
        out.append(rng.randrange(1000, 1256) if r < 0.45 else
                   rng.randrange(0, 20) if r < 0.5 else rng.randrange(1256, 131072))
    return out


def _run(tok, prompt, outputs, sst, window):
    det = IncrementalDetokenizer(tok, prompt, skip_special_tokens=sst, prefill_window=window)
    deltas = []
    for token in outputs:
        det.update([token], False)
        deltas.append(det.get_next_output_text(False, True))
    deltas.append(det.get_next_output_text(True, True))
    return deltas, det.output_text


@pytest.mark.parametrize("sst", [True, False])
def test_short_prefill_gives_the_same_deltas_as_the_whole_prompt(tok, sst):
    window = PREFILL_WINDOW
    rng = random.Random(7 if sst else 8)
    shortened = 0
    for _ in range(300):
        prompt = _random_ids(rng, rng.randrange(70, 400))
        outputs = _random_ids(rng, rng.randrange(1, 12))
        if len(stream_prefill(tok.hf, prompt, sst, window)) < len(prompt):
            shortened += 1
        assert _run(tok, prompt, outputs, sst, window) == _run(tok, prompt, outputs, sst, None)
    assert shortened > 100  # the fast path is the common one


def test_prompt_ending_in_broken_utf8_keeps_the_whole_prompt(tok):
    prompt = tok.encode("word " * 100, add_special_tokens=True) + [1240, 1159]  # half an emoji
    assert stream_prefill(tok.hf, prompt, True) == prompt
    deltas, text = _run(tok, prompt, [1152, 1128], True, PREFILL_WINDOW)
    assert text.startswith("word word") and text.endswith("😀")  # docs/text-parity.md §2.3 quirk


def test_long_natural_prompt_uses_a_short_tail(tok):
    prompt = tok.encode("The quick brown fox jumps over the lazy dog. " * 500, True)
    assert len(stream_prefill(tok.hf, prompt, True)) == PREFILL_WINDOW
