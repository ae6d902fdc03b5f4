"""mistral ([THINK]…[/THINK]) and granite ("Here is my thought process: …") reasoning parsers."""
from __future__ import annotations

import pytest

from tests.unit.text.tool_parsers.conftest import accumulate, token_deltas
from text.reasoning import get_reasoning_parser


def make(name, vocab):
    return get_reasoning_parser(name)(vocab, {})


def streamed(parser, tok, text):
    deltas = []
    for piece, ids in token_deltas(tok, text):
        deltas.append(None if parser.ended else parser.feed(piece, ids))
    return accumulate(deltas + [parser.flush()])


@pytest.mark.parametrize("text, reasoning, content", [
    ("[THINK]hmm  [/THINK]answer", "hmm", "answer"),
    ("Hi [THINK]hmm[/THINK] there", "hmm", "Hi  there"),
    ("no thought", None, "no thought"),
    ("[THINK]plan[TOOL_CALLS]f[ARGS]{}", "plan", "[TOOL_CALLS]f[ARGS]{}"),
    ("[THINK]open", "open", None),
])
def test_mistral_whole(vocab, text, reasoning, content):
    assert make("mistral", vocab).extract(text) == (reasoning, content)


def test_mistral_stream_counts_and_prompt(vocab, marker_tok):
    parser = make("mistral", vocab)
    got = streamed(parser, marker_tok, "\n[THINK]a b \n[/THINK]rest")
    assert (got["reasoning"], got["content"]) == ("a b", "\n")  # the rest goes to the tool side
    assert parser.ended
    ids = marker_tok.encode("[THINK]a b[/THINK]c", False)
    assert make("mistral", vocab).count_reasoning_tokens(ids) == len(
        marker_tok.encode("a b", False))
    assert make("mistral", vocab).prompt_ends_reasoning(marker_tok.encode("x[/THINK]", False))
    assert not make("mistral", vocab).prompt_ends_reasoning([])
    assert get_reasoning_parser("mistral").keep_special_tokens


@pytest.mark.parametrize("text, reasoning, content", [
    ("Here is my thought process: a Here is my response: b", " a ", " b"),
    ("x Here's my thought process:a Here's my response:", "a ", None),
    ("Here is my thought process: no answer", None, "Here is my thought process: no answer"),
])
def test_granite_whole(vocab, text, reasoning, content):
    assert make("granite", vocab).extract(text) == (reasoning, content)


def test_granite_stream(vocab, marker_tok):
    got = streamed(make("granite", vocab), marker_tok,
                   "Here is my thought process: plan. Here is my response: done")
    assert (got["reasoning"], got["content"]) == (" plan. ", " done")
    got = streamed(make("granite", vocab), marker_tok, "Here is the answer")
    assert (got["reasoning"], got["content"]) == ("", "Here is the answer")
    parser = make("granite", vocab)
    streamed(parser, marker_tok, "Here is my thought process: a Here is my response: b")
    assert not parser.ended and parser.count_reasoning_tokens([1, 2]) == 0
