"""The byte-level tables give exactly what the tokenizer's own decoding gives: each token's
bytes, any join of tokens, and a stream's deltas against a DecodeStream pre-filled with the
whole prompt (vLLM's way), on random ids of which ~45% are raw bytes."""
from __future__ import annotations

import random

import pytest
from tokenizers.decoders import DecodeStream

from text.byte_level import ByteLevelSteps, ByteLevelVocab
from text.detokenizer import IncrementalDetokenizer

from tests.unit.text.test_stream_prefill import _random_ids


def _odd_ids(rng: random.Random, n: int) -> list[int]:
    """Random ids, now and then one the tokenizer has no token for, or cannot take."""
    ids = _random_ids(rng, n)
    for i in range(len(ids)):
        r = rng.random()
        if r < 0.02:
            ids[i] = rng.choice([131072, 200_000, 2 ** 32 - 1])  # decodes to nothing
        elif r < 0.03:
            ids[i] = rng.choice([-1, 2 ** 32])  # no stream can take it
    return ids


def test_the_fast_path_is_on_for_a_byte_level_decoder(tok_fast):
    assert isinstance(tok_fast.byte_level, ByteLevelVocab)


@pytest.mark.parametrize("sst", [True, False])
def test_each_byte_token_is_its_byte(tok_fast, sst):
    vocab = tok_fast.byte_level
    # Tekken's 256 raw-byte tokens are ids 1000-1255, in byte order.
    assert [vocab.token_bytes(1000 + b, sst) for b in range(256)] == [bytes([b]) for b in range(256)]


@pytest.mark.parametrize("sst", [True, False])
def test_any_join_of_tokens_decodes_as_the_tokenizer_does(tok_fast, sst):
    rng = random.Random(21 if sst else 22)
    vocab, hf = tok_fast.byte_level, tok_fast.hf
    for _ in range(2000):
        ids = [i for i in _odd_ids(rng, rng.randrange(1, 12)) if 0 <= i < 2 ** 32]
        joined = b"".join(vocab.token_bytes(i, sst) for i in ids)
        assert joined.decode("utf-8", "replace") == hf.decode(ids, skip_special_tokens=sst), ids


def _stream_deltas(hf, prompt, outputs, sst):
    stream = DecodeStream(ids=list(prompt), skip_special_tokens=sst)
    deltas = []
    for token_id in outputs:
        try:
            deltas.append(stream.step(hf, token_id) or "")
        except (OverflowError, TypeError):
            deltas.append("")
    return deltas


@pytest.mark.parametrize("sst", [True, False])
def test_steps_bring_out_what_a_whole_prompt_decode_stream_does(tok_fast, sst):
    rng = random.Random(23 if sst else 24)
    vocab, hf = tok_fast.byte_level, tok_fast.hf
    held_prompts = 0
    for _ in range(1500):
        prompt = _random_ids(rng, rng.randrange(0, 30))
        outputs = _odd_ids(rng, rng.randrange(1, 25))
        steps = ByteLevelSteps(vocab, prompt, sst)
        held_prompts += bool(steps._pending)
        assert [steps.step(t) for t in outputs] == _stream_deltas(hf, prompt, outputs, sst), (
            prompt, outputs)
    assert held_prompts > 100  # prompts ending in broken UTF-8 (docs/text-parity.md §2.3)


@pytest.mark.parametrize("sst", [True, False])
def test_a_run_brings_out_what_its_steps_do(tok_fast, sst):
    rng = random.Random(25 if sst else 26)
    vocab = tok_fast.byte_level
    for _ in range(800):
        prompt = _random_ids(rng, rng.randrange(0, 10))
        runs = [_odd_ids(rng, rng.randrange(1, 20)) for _ in range(rng.randrange(1, 5))]
        one, many = ByteLevelSteps(vocab, prompt, sst), ByteLevelSteps(vocab, prompt, sst)
        assert ([many.run(run) for run in runs]
                == ["".join(one.step(t) for t in run) for run in runs]), (prompt, runs)


@pytest.mark.parametrize("sst", [True, False])
def test_the_detokenizer_gives_the_same_deltas_either_way(tok_fast, tok_stream, sst):
    """Stop strings too: with them each token's text is taken one step at a time."""
    rng = random.Random(27 if sst else 28)
    for case in range(600):
        prompt = _random_ids(rng, rng.randrange(1, 120))
        runs = [_random_ids(rng, rng.randrange(1, 15)) for _ in range(rng.randrange(1, 6))]
        stop = ["e", " t", "\ufffd"][: case % 4]
        answers = []
        for tokenizer in (tok_fast, tok_stream):
            det = IncrementalDetokenizer(tokenizer, prompt, skip_special_tokens=sst, stop=stop)
            deltas = []
            for run in runs:
                deltas.append((det.update(run, False), det.get_next_output_text(False, True)))
            answers.append((deltas, det.output_text, det.token_ids))
        assert answers[0] == answers[1], (prompt, runs, stop)


def test_tables_fill_only_as_tokens_are_met(tok_model_dir_fresh):
    vocab = tok_model_dir_fresh.byte_level
    assert vocab.texts[1].count(None) == vocab.size
    ByteLevelSteps(vocab, [1, 1784], True).run([1784, 8961, 1240])
    filled = [i for i, text in enumerate(vocab.texts[1]) if text is not None]
    assert filled == [1784, 8961]  # 1240 is a byte of a longer character: no text of its own
    assert vocab.token_bytes(1240, True, cache=False) == b"\xf0"


@pytest.fixture
def tok_model_dir_fresh(model_dir):
    from text.tokenizer import Tokenizer
    return Tokenizer.load(model_dir, backend="fastokens")
