"""Session-wide fixtures: the test model directory (the real Tekken tokenizer, built locally)."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> str:
    """A built model directory: $GREENFRONT_TEST_MODEL_DIR if it exists, else built here."""
    preset = os.environ.get("GREENFRONT_TEST_MODEL_DIR")
    if preset and os.path.exists(os.path.join(preset, ".complete")):
        return preset
    from text.make_default_model import build
    return build(str(tmp_path_factory.mktemp("model") / "tekken-tiny"))


@pytest.fixture(scope="session")
def marker_model_dir(tmp_path_factory) -> str:
    """The tool-calling test model: every parser family's marker tokens, a ChatML tool template
    ($GREENFRONT_TEST_MARKER_MODEL_DIR if it exists, else built here)."""
    preset = os.environ.get("GREENFRONT_TEST_MARKER_MODEL_DIR")
    if preset and os.path.exists(os.path.join(preset, ".complete")):
        return preset
    from text.make_default_model import build
    return build(str(tmp_path_factory.mktemp("model") / "tekken-markers"), markers=True)
