"""mistral with a pre-v11 tokenizer (no [ARGS] token): [TOOL_CALLS][{...}, ...], whole and
streamed, as vLLM 0.32 reads it."""
from __future__ import annotations

import pytest

from tests.unit.text.tool_parsers.conftest import stream
from text.tokenizer import Tokenizer
from text.tool_parsers import get_tool_parser
from text.tool_parsers.json_events import scan_calls

W = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
T = '{"name": "get_time", "arguments": {"zone": {"tz": "CET"}}}'


@pytest.fixture(scope="module")
def tiny_tok(model_dir) -> Tokenizer:
    return Tokenizer.load(model_dir, backend="hf")


@pytest.fixture(scope="module")
def tiny_vocab(tiny_tok):
    vocab = tiny_tok.hf.get_vocab(True)
    assert "[ARGS]" not in vocab and "[TOOL_CALLS]" in vocab
    return vocab


def make(vocab):
    return get_tool_parser("mistral")(vocab, None)


@pytest.mark.parametrize("text,calls,content", [
    (f"[TOOL_CALLS][{W}]", [("get_weather", '{"city": "Paris"}')], None),
    (f"Sure. [TOOL_CALLS][{W}, {T}] bye", [("get_weather", '{"city": "Paris"}'),
                                           ("get_time", '{"zone": {"tz": "CET"}}')], "Sure. "),
    (f"[TOOL_CALLS]{W}", [("get_weather", '{"city": "Paris"}')], None),
    ('[TOOL_CALLS][{"name": 5}, 3, {"x": 1}, {"arguments": "raw"}]', [("", "{}"), ("", "raw")],
     None),
    ("[TOOL_CALLS]not json", [], "not json"),
    ("It is sunny.", [], "It is sunny."),
])
def test_whole(tiny_vocab, text, calls, content):
    out = make(tiny_vocab).extract(text)
    assert [(c.name, c.arguments) for c in out.calls] == calls
    assert out.content == content


def test_stream(tiny_vocab, tiny_tok):
    got = stream(make(tiny_vocab), tiny_tok, f"Hi [TOOL_CALLS][{W}, {T}] after")
    assert got["content"] == "Hi  after"
    assert [(c["name"], c["arguments"]) for c in got["calls"].values()] == [
        ("get_weather", '{"city": "Paris"}'), ("get_time", '{"zone": {"tz": "CET"}}')]


def test_scan_stops_at_unfinished_tokens():
    found = scan_calls('[{"name": "f", "arguments": {"a": 1')
    assert found.end is None and found.calls[0].name == "f"
    assert found.calls[0].args_start is not None and found.calls[0].args_end is None
    assert scan_calls('[{"name": "f').calls[0].name is None
