"""Every tool-call family streams well-formed calls whatever the size of its deltas.

A response that falls behind its engine takes many tokens as one delta (at 1,024 streams in one
worker, ~60), so one delta may close a call and open the next. Over the parity cases with
several calls (``tests/interop/test_tool_parity.py``), streamed in pieces of several sizes: the
call indices run 0, 1, … without a gap, each call gets its id and name once, and the names are
those the whole-output parse finds.
"""
from __future__ import annotations

import pytest

from tests.interop.parity import TOOLS
from tests.interop.test_tool_parity import CONFIGS
from tests.unit.text.tool_parsers.conftest import accumulate, token_deltas
from text.tool_parsers import get_tool_parser

#: tokens per delta
SIZES = (1, 3, 11, 29, 64, 10_000)

#: Families that follow vLLM 0.32's parsers one step per delta: a delta in which one call ends
#: and the next begins moves to the last call seen (llama*_json) or reads only the delta's last
#: call (DeepSeek), so a call can lose its name or be skipped; vLLM's own frontend does the same
#: when it joins several tokens into one delta.
ONE_STEP_PER_DELTA = {"llama3_json", "llama4_json", "deepseek_v3", "deepseek_v31"}


def _pieces(tok, text: str, size: int) -> list[tuple[str, list[int]]]:
    """The detokenizer's deltas of ``text``, ``size`` tokens joined into each."""
    deltas = list(token_deltas(tok, text))
    return [("".join(t for t, _ in deltas[i:i + size]),
             [x for _, ids in deltas[i:i + size] for x in ids])
            for i in range(0, len(deltas), size)]


def _multi_call_cases(vocab):
    for config, (flags, cases) in CONFIGS.items():
        if "--tool-call-parser" not in flags:
            continue
        family = flags[flags.index("--tool-call-parser") + 1]
        for name, text, extra in cases:
            if extra:  # tool_choice, n, max_tokens, parallel_tool_calls change the answer
                continue
            # What the reasoning parser passes on to the tool parser (the thought's end).
            text = text.removeprefix("</think>").removeprefix("[/THINK]")
            if len(get_tool_parser(family)(vocab, TOOLS).extract(text).calls) >= 2:
                yield family, name, text


def _streamed_calls(family, text, tok, size, vocab) -> dict:
    parser = get_tool_parser(family)(vocab, TOOLS)
    return accumulate([parser.feed(piece, ids) for piece, ids in _pieces(tok, text, size)]
                      + [parser.flush()])["calls"]


def test_there_are_multi_call_cases_for_most_families(vocab):
    assert len({family for family, _, _ in _multi_call_cases(vocab)}) >= 10


@pytest.mark.parametrize("size", SIZES)
def test_calls_streamed_in_pieces_of_any_size_are_well_formed(vocab, marker_tok, size):
    for family, name, text in _multi_call_cases(vocab):
        if family in ONE_STEP_PER_DELTA and size > 1:
            continue
        whole = get_tool_parser(family)(vocab, TOOLS).extract(text)
        got = _streamed_calls(family, text, marker_tok, size, vocab)
        where = f"{family} / {name} / pieces of {size}"
        assert sorted(got) == list(range(len(got))), where
        assert [got[i]["name"] for i in sorted(got)] == [c.name for c in whole.calls], where
        assert all(got[i]["id"] for i in got), where


@pytest.mark.xfail(strict=True, reason="these families move one call per delta, as vLLM "
                   "0.32's parsers do")
def test_one_step_per_delta_families_lose_calls_in_large_deltas(vocab, marker_tok):
    for family, name, text in _multi_call_cases(vocab):
        if family in ONE_STEP_PER_DELTA:
            # Nothing raises (a parser failure would stream nothing for the delta, logged).
            whole = get_tool_parser(family)(vocab, TOOLS).extract(text)
            got = _streamed_calls(family, text, marker_tok, 64, vocab)
            assert [got[i]["name"] for i in sorted(got)] == [c.name for c in whole.calls]


def test_no_family_fails_on_a_delta_of_any_size(vocab, marker_tok, caplog):
    # deepseek_v3 raised IndexError on a delta holding a whole call; the stream then broke.
    for size in SIZES:
        for family, name, text in _multi_call_cases(vocab):
            _streamed_calls(family, text, marker_tok, size, vocab)
    assert not [r for r in caplog.records if "tool parser failed" in r.getMessage()]
