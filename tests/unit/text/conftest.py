"""Fixtures for the text tests: the default model directory (built once) and its tokenizers."""
from __future__ import annotations

import os

import pytest

from text.make_default_model import build
from text.tokenizer import Tokenizer


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """$GREENFRONT_TEST_MODEL_DIR when it names a complete build, else a fresh build (~2 s)."""
    preset = os.environ.get("GREENFRONT_TEST_MODEL_DIR")
    if preset and os.path.exists(os.path.join(preset, ".complete")):
        return preset
    return build(str(tmp_path_factory.mktemp("model") / "tekken-tiny"))


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
