"""Incremental detokenizer and stop strings against the captured vLLM behaviour (docs/text-parity.md §2-3)."""
from __future__ import annotations

import pytest

from text.detokenizer import IncrementalDetokenizer

PROMPT = [1, 1784, 8961, 1307, 5498, 1395]  # "<s>The capital of France is"
# Greedy output of the reference tiny model: ":**", " нельзя", " bern", "Key", " Execut", ...
OUTPUT = [3795, 115370, 73750, 4756, 27797, 35424, 4756, 27797]
FULL_TEXT = ":** нельзя bernKey Execut\ufffdKey Execut"
EMOJI = [1240, 1159, 1152, 1128]  # 😀 as four byte tokens
FFFD_TOKEN = 66122


@pytest.fixture(params=["byte-level", "decode-stream"])
def tok(request, tok_fast, tok_stream):
    """Each test on both ways of making text: the byte-level tables (text/byte_level.py) and
    the DecodeStream."""
    return tok_fast if request.param == "byte-level" else tok_stream


def run(tok, output, *, max_tokens=None, eos_last=False, prompt=PROMPT, **kw):
    """Drive a detokenizer one token per step like the engine would.

    Returns (text, finish_reason, stop_reason, num_output_tokens, deltas).
    `eos_last`: the engine finishes with STOP on the last token (EOS or a stop token id).
    """
    d = IncrementalDetokenizer(tok, prompt, **kw)
    max_tokens = max_tokens or len(output)
    deltas = []
    for i, token in enumerate(output[:max_tokens]):
        last = i == min(len(output), max_tokens) - 1
        engine_stop = eos_last and last
        stop_str = d.update([token], engine_stop)
        finished = last or stop_str is not None
        deltas.append(d.get_next_output_text(finished, delta=True))
        if stop_str is not None:
            return d.output_text, "stop", stop_str, d.num_output_tokens, deltas
        if finished:
            reason = "stop" if engine_stop else "length"
            return d.output_text, reason, None, d.num_output_tokens, deltas
    raise AssertionError("unreachable")


def test_no_stop(tok):
    text, reason, stop, n, deltas = run(tok, OUTPUT)
    assert (text, reason, stop, n) == (FULL_TEXT, "length", None, 8)
    assert "".join(deltas) == FULL_TEXT
    assert deltas[:5] == [":**", " нельзя", " bern", "Key", " Execut"]


@pytest.mark.parametrize("kw,expected", [
    ({"stop": ["bern"]}, (":** нельзя ", "stop", "bern", 3)),
    ({"stop": ["bern"], "include_stop_str_in_output": True}, (":** нельзя bern", "stop", "bern", 3)),
    ({"stop": ["ль"]}, (":** не", "stop", "ль", 2)),
    ({"stop": ["nKey"]}, (":** нельзя ber", "stop", "nKey", 4)),
    ({"stop": ["Key", "bern"]}, (":** нельзя ", "stop", "bern", 3)),
    ({"stop": ["bern"], "min_tokens": 2}, (":** нельзя ", "stop", "bern", 3)),
    ({"stop": ["bern"], "min_tokens": 3}, (FULL_TEXT, "length", None, 8)),
])
def test_stop_strings(tok, kw, expected):
    text, reason, stop, n, deltas = run(tok, OUTPUT, **kw)
    assert (text, reason, stop, n) == expected
    assert "".join(deltas) == text


def test_stop_on_last_allowed_token(tok):
    assert run(tok, OUTPUT, max_tokens=3, stop=["bern"])[:4] == (":** нельзя ", "stop", "bern", 3)


def test_streaming_hold_back_no_match(tok):
    text, reason, _, n, deltas = run(tok, OUTPUT, max_tokens=5, stop=["zzzzzz"])
    assert deltas == ["", ":** н", "ельзя", " be", "rnKey Execut"]
    assert (reason, n) == ("length", 5)


def test_streaming_hold_back_with_match(tok):
    _, reason, stop, n, deltas = run(tok, OUTPUT, stop=["Exe", "nothing-matches-here"])
    assert deltas == ["", "", "", "", ":** нельзя bernKey "]
    assert (reason, stop, n) == ("stop", "Exe", 5)


def test_no_hold_back_when_stop_included(tok):
    deltas = run(tok, OUTPUT, max_tokens=3, stop=["zzzzzz"], include_stop_str_in_output=True)[4]
    assert deltas == [":**", " нельзя", " bern"]


def test_non_delta_output_holds_back(tok):
    d = IncrementalDetokenizer(tok, PROMPT, stop=["zzzz"])
    d.update(OUTPUT[:2], False)
    assert d.get_next_output_text(False, delta=False) == ":** нел"  # 3 held back
    assert d.get_next_output_text(True, delta=False) == ":** нельзя"


def test_multi_token_step_drops_tokens_after_match(tok):
    d = IncrementalDetokenizer(tok, PROMPT, stop=["ль"])
    assert d.update(OUTPUT[:4], False) == "ль"
    assert d.output_text == ":** не"
    assert d.token_ids == OUTPUT[:2] and d.num_output_tokens == 2


def test_earliest_ending_match_wins_within_a_step(tok):
    d = IncrementalDetokenizer(tok, PROMPT, stop=["Key", "ern"])
    assert d.update(OUTPUT, False) == "ern"
    assert d.output_text == ":** нельзя b" and d.num_output_tokens == 3


# -- EOS and stop token ids (docs/text-parity.md §3.3) -----------------------------------------------------------------

@pytest.mark.parametrize("output,kw,expected_text,n", [
    ([2], {}, "", 1),
    ([2], {"skip_special_tokens": False}, "", 1),
    ([2], {"skip_special_tokens": False, "include_stop_str_in_output": True}, "</s>", 1),
    ([3795, 115370, 2], {"min_tokens": 2}, ":** нельзя", 3),
    ([3795, 115370, 73750], {}, ":** нельзя", 3),
    ([3795, 115370, 73750], {"include_stop_str_in_output": True}, ":** нельзя bern", 3),
])
def test_engine_stop_excludes_last_token(tok, output, kw, expected_text, n):
    text, reason, stop, count, deltas = run(tok, output, eos_last=True, **kw)
    assert (text, reason, stop, count) == (expected_text, "stop", None, n)
    assert "".join(deltas) == expected_text
    if not kw.get("include_stop_str_in_output"):
        assert deltas[-1] == ""  # the finishing chunk of an EOS/stop-token finish is empty


def test_ignore_eos_repeats(tok):
    assert run(tok, [2, 2, 2, 2])[0] == ""
    assert run(tok, [2, 2, 2, 2], skip_special_tokens=False)[0] == "</s></s></s></s>"


@pytest.mark.parametrize("spaces", [True, False])
def test_adjacent_special_tokens(tok, spaces):
    ids = tok.encode("Hi</s>[INST][/INST] there", add_special_tokens=False)
    text = run(tok, ids, skip_special_tokens=False, spaces_between_special_tokens=spaces)[0]
    assert text == "Hi</s>[INST][/INST] there"


# -- incomplete UTF-8 (docs/text-parity.md §2.2) -----------------------------------------------------------------------

def test_split_emoji_comes_out_whole(tok):
    assert run(tok, EMOJI)[4] == ["", "", "", "😀"]


def test_trailing_partial_character_is_dropped(tok):
    text, *_, deltas = run(tok, EMOJI[:2])
    assert (text, deltas) == ("", ["", ""])


def test_replacement_char_in_the_middle_is_kept(tok):
    ab = tok.encode("ab", add_special_tokens=False)
    cd = tok.encode("cd", add_special_tokens=False)
    text, *_, deltas = run(tok, ab + EMOJI[:2] + cd)
    assert deltas == ["ab", "", "", "\ufffdcd"]
    assert text == "ab\ufffdcd"


def test_literal_fffd_token(tok):
    x = tok.encode("x", add_special_tokens=False)
    y = tok.encode("y", add_special_tokens=False)
    assert tok.decode([FFFD_TOKEN], skip_special_tokens=True) == "\ufffd"
    assert run(tok, x + [FFFD_TOKEN])[0] == "x"
    assert run(tok, x + [FFFD_TOKEN] + y)[4] == ["x", "", "\ufffdy"]


# -- prompt pre-fill quirk (docs/text-parity.md §2.3) ------------------------------------------------------------------

def test_prompt_ending_in_partial_character_is_copied(tok):
    fox = "The quick brown fox jumps over the lazy dog"
    prompt = [1] + tok.encode(fox, add_special_tokens=False) + EMOJI[:2]
    again = tok.encode(" again", add_special_tokens=False)
    assert again == [2790]
    assert run(tok, EMOJI[2:] + again, prompt=prompt)[4] == ["", fox + "😀", " again"]


def test_prompt_ending_in_fffd_text(tok):
    prompt = tok.encode("Hello \ufffd", add_special_tokens=True)
    assert prompt == [1, 22177, 42120, 61690]
    out = tok.encode("東日本", add_special_tokens=False)
    assert out == [127936]
    # The live server returned this text for 3 completion tokens.
    assert run(tok, out * 3, prompt=prompt)[0] == "Hello \ufffd東日本東日本東日本"


def test_invalid_token_id_gives_empty_piece(tok):
    d = IncrementalDetokenizer(tok, PROMPT)
    d.update([3795], False)
    d.update([-1], False)  # OverflowError inside the stream: logged, emits nothing
    d.update([115370], False)
    assert d.output_text == ":** нельзя"
    assert d.num_output_tokens == 3
