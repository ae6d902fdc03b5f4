"""deepseek_r1 and qwen3 reasoning parsers: whole outputs, streams, token counts."""
from __future__ import annotations

import pytest

from tests.unit.text.tool_parsers.conftest import accumulate, token_deltas
from text.reasoning import get_reasoning_parser


def make(name, vocab, **kwargs):
    return get_reasoning_parser(name)(vocab, kwargs)


def streamed(parser, tok, text):
    deltas = []
    for piece, ids in token_deltas(tok, text):
        if parser.ended:
            deltas.append(None)
            continue
        deltas.append(parser.feed(piece, ids))
    return accumulate(deltas)


@pytest.mark.parametrize("name", ["deepseek_r1", "qwen3"])
@pytest.mark.parametrize("text, reasoning, content", [
    ("<think>hmm</think>answer", "hmm", "answer"),
    ("hmm</think>answer", "hmm", "answer"),
    ("still thinking", "still thinking", None),
    ("hmm</think>", "hmm", None),
])
def test_whole_outputs(name, text, reasoning, content, vocab):
    assert make(name, vocab).extract(text) == (reasoning, content)


def test_qwen3_ends_the_thought_at_a_tool_call_and_drops_repeated_end_tags(vocab):
    p = make("qwen3", vocab)
    assert p.extract("plan <tool_call>x</tool_call>") == ("plan ", "<tool_call>x</tool_call>")
    assert p.extract("<think>a</think>b</think>c") == ("a", "bc")


def test_qwen3_without_thinking_is_all_content(vocab):
    p = make("qwen3", vocab, enable_thinking=False)
    assert p.extract("hmm</think>x") == (None, "hmm</think>x")
    assert p.ended and p.prompt_ends_reasoning([])


def test_streams_split_at_the_end_marker(vocab, marker_tok):
    for name in ("deepseek_r1", "qwen3"):
        p = make(name, vocab)
        got = streamed(p, marker_tok, "<think>one two</think>three")
        assert got["reasoning"] == "one two"
        assert p.ended


def test_prompt_that_closed_the_thought(vocab):
    p = make("deepseek_r1", vocab)
    assert p.prompt_ends_reasoning([vocab["<think>"], 5, vocab["</think>"]])
    assert not p.prompt_ends_reasoning([vocab["</think>"], vocab["<think>"], 5])


def test_reasoning_token_counts(vocab, marker_tok):
    ids = marker_tok.encode("<think>a b</think>c", False)
    assert make("deepseek_r1", vocab).count_reasoning_tokens(ids) == 2
    assert make("qwen3", vocab).count_reasoning_tokens(ids) == 2
    bare = marker_tok.encode("a b</think>c", False)
    assert make("deepseek_r1", vocab).count_reasoning_tokens(bare) == 0  # no opening tag
    assert make("qwen3", vocab).count_reasoning_tokens(bare) == 2
