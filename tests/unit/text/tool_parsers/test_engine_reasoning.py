"""glm45, kimi_k2 and minimax_m2 reasoning parsers: whole outputs and streams as vLLM 0.32
answers the same texts (its outputs recorded from its own parsers on the marker model)."""
from __future__ import annotations

import pytest

from tests.unit.text.tool_parsers.conftest import accumulate, token_deltas
from text.reasoning import get_reasoning_parser

TOOL = {"glm45": "<tool_call>", "kimi_k2": "<|tool_calls_section_begin|>",
        "minimax_m2": "<minimax:tool_call>"}


def make(name, vocab, **kwargs):
    return get_reasoning_parser(name)(vocab, kwargs)


def streamed(parser, tok, text):
    deltas = []
    content = ""
    for piece, ids in token_deltas(tok, text):
        if parser.ended:  # the pipeline hands the rest to the content/tool side
            content += piece
            continue
        deltas.append(parser.feed(piece, ids))
    out = accumulate(deltas)
    out["content"] += content
    return out


CASES = [
    ("<think>abc</think>hello", "abc", "hello"),
    ("abc</think>hello", "abc", "hello"),
    ("abc", "abc", None),
    ("</think>", None, None),
    ("plain answer", "plain answer", None),
    ("hi<think>a</think>b", "hia", "b"),
    ("<think>\n\nplan\n\n</think>\n\nanswer", "\n\nplan", "\n\nanswer"),
    ("a</think>", "a", None),
    ("</think>b", None, "b"),
]


@pytest.mark.parametrize("name", list(TOOL))
@pytest.mark.parametrize("text, reasoning, content", CASES)
def test_whole_and_streamed(name, text, reasoning, content, vocab, marker_tok):
    assert make(name, vocab).extract(text) == (reasoning, content)
    got = streamed(make(name, vocab), marker_tok, text)
    assert (got["reasoning"] or None, got["content"] or None) == (reasoning, content)


@pytest.mark.parametrize("name", list(TOOL))
def test_the_familys_tool_marker_ends_the_thought(name, vocab, marker_tok):
    marker = TOOL[name]
    text = f"hello{marker}x"
    assert make(name, vocab).extract(text) == ("hello", f"{marker}x")
    got = streamed(make(name, vocab), marker_tok, text)
    assert (got["reasoning"], got["content"]) == ("hello", f"{marker}x")
    other = next(m for n, m in TOOL.items() if n != name)
    assert make(name, vocab).extract(f"hello{other}x") == (f"hello{other}x", None)


@pytest.mark.parametrize("name, switch", [("glm45", True), ("kimi_k2", True),
                                          ("minimax_m2", False)])
@pytest.mark.parametrize("kwargs", [{"enable_thinking": False}, {"thinking": False}])
def test_thinking_switched_off(name, switch, kwargs, vocab):
    p = make(name, vocab, **kwargs)
    text = "<think>abc</think>hello"
    if switch:
        assert p.extract(text) == (None, text)
        assert p.ended and p.prompt_ends_reasoning([])
    else:
        assert p.extract(text) == ("abc", "hello")
        assert not p.prompt_ends_reasoning([])
    assert make(name, vocab, thinking=False, enable_thinking=True).extract(text) == ("abc",
                                                                                    "hello")


@pytest.mark.parametrize("name", list(TOOL))
def test_prompt_that_closed_the_thought(name, vocab):
    p = make(name, vocab)
    start, end, tool = vocab["<think>"], vocab["</think>"], vocab[TOOL[name]]
    assert p.prompt_ends_reasoning([start, 5, end])
    assert p.prompt_ends_reasoning([5, tool, 6])
    assert not p.prompt_ends_reasoning([end, start, 5])
    assert not p.prompt_ends_reasoning([5, 6])
