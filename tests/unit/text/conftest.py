"""Fixtures for the text tests: the tokenizers of the session's model directory (tests/conftest.py)."""
from __future__ import annotations

import pytest

from text.tokenizer import Tokenizer


@pytest.fixture(scope="session")
def tok_hf(model_dir: str) -> Tokenizer:
    return Tokenizer.load(model_dir, backend="hf")


@pytest.fixture(scope="session")
def tok_fast(model_dir: str) -> Tokenizer:
    return Tokenizer.load(model_dir, backend="fastokens")


@pytest.fixture(scope="session")
def tok(tok_fast: Tokenizer) -> Tokenizer:
    """The production configuration (fastokens encoder, HF decoder)."""
    return tok_fast


@pytest.fixture(scope="session")
def tok_stream(model_dir: str) -> Tokenizer:
    """The production tokenizer with the byte-level fast path off: the detokenizer steps a
    DecodeStream, as it does for a tokenizer whose decoder is not byte-level."""
    tokenizer = Tokenizer.load(model_dir, backend="fastokens")
    tokenizer.byte_level = None
    return tokenizer
