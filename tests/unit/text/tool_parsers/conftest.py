"""Fixtures for the output-parser tests: the marker model's vocabulary and a streaming driver
that feeds a text token by token, as the detokenizer would."""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from text.parsed import DeltaParts
from text.tokenizer import Tokenizer


@pytest.fixture(scope="session")
def marker_tok(marker_model_dir: str) -> Tokenizer:
    return Tokenizer.load(marker_model_dir, backend="hf")


@pytest.fixture(scope="session")
def vocab(marker_tok: Tokenizer) -> dict[str, int]:
    return marker_tok.hf.get_vocab(True)


def token_deltas(tok: Tokenizer, text: str) -> Iterator[tuple[str, list[int]]]:
    """(delta text, [id]) per token of ``text``, special tokens kept in the text."""
    ids = tok.encode(text, False)
    previous, sent = "", 0
    for i in range(len(ids)):
        current = tok.decode(ids[:i + 1], skip_special_tokens=False)
        if current.endswith("\ufffd"):
            continue  # an incomplete UTF-8 sequence waits for its next token
        yield current[len(previous):], ids[sent:i + 1]
        previous, sent = current, i + 1
    assert previous == text


def accumulate(deltas: list[DeltaParts | None]) -> dict[str, Any]:
    """Streamed deltas folded per field: content, reasoning, and per call index its id, name
    and concatenated arguments (how the parity tests compare streams)."""
    out: dict[str, Any] = {"content": "", "reasoning": "", "calls": {}}
    for d in deltas:
        if d is None:
            continue
        out["content"] += d.content or ""
        out["reasoning"] += d.reasoning or ""
        for call in d.tool_calls:
            entry = out["calls"].setdefault(call.index, {"id": None, "name": None,
                                                         "arguments": ""})
            if call.id is not None:
                assert entry["id"] is None, "a call's id is sent once"
                entry["id"] = call.id
            if call.name is not None:
                entry["name"] = call.name
            entry["arguments"] += call.arguments or ""
    return out


def stream(parser: Any, tok: Tokenizer, text: str) -> dict[str, Any]:
    """Feed ``text`` token by token to a tool parser, then what it holds at the end; the
    accumulated result."""
    deltas = [parser.feed(piece, ids) for piece, ids in token_deltas(tok, text)]
    return accumulate(deltas + [parser.flush()])
