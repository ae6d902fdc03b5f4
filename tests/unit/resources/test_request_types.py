"""Each endpoint's typed request struct declares exactly its field table's fields, so that
``parse_struct`` fills every field the table validates and nothing else."""
from __future__ import annotations

import pytest

from resources.chat import types as chat
from resources.common.fields import parse_struct, struct_matches
from resources.completions import types as completions
from resources.generate import types as generate
from resources.tokenize import types as tokenize

PAIRS = [
    (completions.fields(4), completions.CompletionRequest),
    (chat.fields(4), chat.ChatRequest),
    (tokenize.COMPLETION_FIELDS, tokenize.TokenizeCompletionRequest),
    (tokenize.CHAT_FIELDS, tokenize.TokenizeChatRequest),
    (tokenize.DETOKENIZE_FIELDS, tokenize.DetokenizeRequest),
    (generate.HEAD + generate.TAIL, generate.GenerateRequest),
    (generate.SAMPLING, generate.GenerateSampling),
]


@pytest.mark.parametrize("fields, struct", PAIRS, ids=lambda p: getattr(p, "__name__", ""))
def test_struct_declares_the_tables_fields(fields, struct):
    assert struct_matches(fields, struct)


def test_a_struct_missing_a_field_does_not_match():
    assert not struct_matches(tokenize.COMPLETION_FIELDS + [("extra", None, None)],
                              tokenize.TokenizeCompletionRequest)


def test_parse_struct_fills_defaults():
    request = parse_struct({"prompt": "hi"}, completions.fields(4), completions.CompletionRequest)
    assert request.prompt == "hi" and request.n == 1 and request.stop == []
    assert request.max_tokens == completions.DEFAULT_MAX_TOKENS
