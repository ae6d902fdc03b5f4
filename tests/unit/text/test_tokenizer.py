"""Tokenizer parity: both encoders give the same ids as the reference model (docs/text-parity.md §4)."""
from __future__ import annotations

import json
import os
import random
import threading

import pytest

from text.model_dir import ModelFiles
from text.tokenizer import Tokenizer

PIECES = [
    "Hello", " world", "The capital of France is", " нельзя", " bern", "Key", " Execut",
    "東京", "日本語のテキスト", "😀", "👨‍👩‍👧", "🇫🇷", "é", "e\u0301", "Straße", "ﬁ", "مرحبا", "שלום",
    "कृपया", "ภาษาไทย", "한국어", "Ελληνικά", "0", "123", "3.14159", "1,000,000", "2026-11-30",
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u200b",
    "<s>", "</s>", "[INST]", "[/INST]", "<pad>", "<unk>", "<SPECIAL_999>", "[TOOL_CALLS]",
    "<s", "[INST", "s>", "def f(x):\n    return x", "{\"a\": [1, 2]}", "http://example.com/a?b=c",
    "'", "\"", "''", "...", "!?", "—", "\ufffd", "\x00", "\x1b[0m", "ǅ", "ΣΑΣ", "ABC", "aBc",
    "I'm", "don't", "x" * 40, "9" * 30, "ß" * 7,
]


def _corpus(n: int, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    out = ["", " ", "a", "\n", "<s>", "😀"]
    while len(out) < n:
        k = rng.randint(1, 12)
        out.append("".join(rng.choice(PIECES) for _ in range(k)))
    return out


EXPECTED = [
    ("The capital of France is", True, [1, 1784, 8961, 1307, 5498, 1395]),
    ("The capital of France is", False, [1784, 8961, 1307, 5498, 1395]),
    ("Hello world", True, [1, 22177, 4304]),
    ("a b c d e f g h i j k l", True,
     [1, 1097, 1289, 1272, 1266, 1324, 1284, 1343, 1310, 1623, 1475, 1409, 1295]),
    ("<s>[INST]x[/INST]", True, [1, 1, 3, 1120, 4]),
    ("", True, [1]),
    ("", False, []),
    ("😀", False, [1240, 1159, 1152, 1128]),
    ("<s>[INST]Be brief.\n\nHi[/INST]", False, [1, 3, 5934, 13426, 1338, 37133, 4]),
]


@pytest.mark.parametrize("backend", ["hf", "fastokens"])
@pytest.mark.parametrize("text,add_special,ids", EXPECTED)
def test_known_ids(model_dir, tok_hf, tok_fast, backend, text, add_special, ids):
    tok = tok_hf if backend == "hf" else tok_fast
    assert tok.encode(text, add_special_tokens=add_special) == ids


def test_backends_agree_on_corpus(tok_hf, tok_fast):
    corpus = _corpus(400)
    for add_special in (True, False):
        hf_ids = tok_hf.encode_many(corpus, add_special)
        fast_ids = tok_fast.encode_many(corpus, add_special)
        for text, a, b in zip(corpus, hf_ids, fast_ids):
            assert a == b, text
        # One-at-a-time encoding is the same as batched encoding.
        for text, a in zip(corpus[:50], hf_ids):
            assert tok_fast.encode(text, add_special) == a


def test_roundtrip_decode(tok):
    for text in _corpus(200, seed=7):
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids, skip_special_tokens=False) == text


def test_long_prompt_300k(tok_hf, tok_fast):
    rng = random.Random(5)
    text = "".join(rng.choice(PIECES) for _ in range(40000))[:300_000]
    a = tok_fast.encode(text, add_special_tokens=True)
    b = tok_hf.encode(text, add_special_tokens=True)
    assert a == b
    assert a[0] == 1 and len(a) > 50_000


def test_whitespace_and_digits(tok_hf, tok_fast):
    for text in [" " * n for n in range(1, 40)] + ["\n" * 5, " \t \n\r\n  x", "1234567890" * 5,
                                                     "12 345 6.78", "a  b   c    d"]:
        assert tok_fast.encode(text, False) == tok_hf.encode(text, False), repr(text)
    # Tekken splits numbers into single digits.
    assert len(tok_hf.encode("1234567890", False)) == 10


def test_decode(tok):
    assert tok.decode([1, 22177, 4304, 2, 3], skip_special_tokens=False) == "<s>Hello world</s>[INST]"
    assert tok.decode([1, 22177, 4304, 2, 3], skip_special_tokens=True) == "Hello world"
    assert tok.decode([200000], skip_special_tokens=False) == ""
    assert tok.decode([1240, 1159], skip_special_tokens=False) == "\ufffd"
    assert tok.decode([1240, 1159, 1152, 1128], skip_special_tokens=True) == "😀"
    assert tok.decode([], skip_special_tokens=True) == ""


def test_token_strings_and_properties(tok, tok_hf):
    assert tok.convert_ids_to_tokens([22177, 4304]) == ["Hello", "Ġworld"]
    assert tok.convert_ids_to_tokens([1, 3, 1338]) == ["<s>", "[INST]", ".ĊĊ"]
    assert tok.convert_ids_to_tokens([999_999]) == [None]
    for t in (tok, tok_hf):
        assert t.vocab_size == 131072
        assert t.bos_token_id == 1 and t.eos_token_id == 2
        assert t.max_chars_per_token == max(len(s) for s in t.hf.get_vocab(with_added_tokens=True))
        assert t.max_chars_per_token >= len("<SPECIAL_999>")
    assert tok.backend == "fastokens" and tok_hf.backend == "hf"


def test_concurrent_use(tok):
    corpus = _corpus(120, seed=99)
    expected = [tok.encode(t, True) for t in corpus]
    errors: list[str] = []

    def worker(offset: int) -> None:
        for i in range(len(corpus)):
            j = (i + offset) % len(corpus)
            if tok.encode(corpus[j], True) != expected[j]:
                errors.append(corpus[j])
            if tok.decode(expected[j], skip_special_tokens=False) != "<s>" + corpus[j]:
                errors.append("decode:" + corpus[j])

    threads = [threading.Thread(target=worker, args=(k * 17,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_unknown_backend(model_dir):
    with pytest.raises(ValueError):
        Tokenizer.load(model_dir, backend="nope")


def test_model_files(model_dir, tmp_path):
    files = ModelFiles.load(model_dir)
    assert files.bos_token == "<s>" and files.eos_token == "</s>"
    assert files.unk_token == "<unk>" and files.pad_token == "<pad>"
    assert files.special_tokens == {"bos_token": "<s>", "eos_token": "</s>",
                                    "unk_token": "<unk>", "pad_token": "<pad>"}
    assert files.max_position_embeddings == 4096 == files.derived_max_model_len()
    assert files.generation_defaults() == {"temperature": 1.0}
    assert files.generation_eos_token_ids() == [2]
    assert files.chat_template and files.chat_template.startswith("{%- if messages[0]['role']")

    # Dict-form tokens, a chat_template.jinja file, named templates and a richer generation config.
    d = tmp_path / "m"
    d.mkdir()
    (d / "tokenizer.json").write_text("{}")
    (d / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": {"content": "<|begin|>", "lstrip": False}, "eos_token": "<|end|>",
        "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}],
    }))
    (d / "generation_config.json").write_text(json.dumps({
        "eos_token_id": [2, 7], "temperature": 0.6, "top_p": 0.9, "top_k": None,
        "max_new_tokens": 100, "do_sample": True,
    }))
    (d / "config.json").write_text(json.dumps({"max_position_embeddings": 8192, "n_positions": 2048}))
    files = ModelFiles.load(str(d))
    assert files.bos_token == "<|begin|>" and files.eos_token == "<|end|>" and files.pad_token is None
    assert files.chat_template == "D"
    assert files.generation_defaults() == {"temperature": 0.6, "top_p": 0.9, "max_tokens": 100}
    assert files.generation_eos_token_ids() == [2, 7]
    assert files.derived_max_model_len() == 2048
    (d / "chat_template.jinja").write_text("J")
    assert ModelFiles.load(str(d)).chat_template == "J"


def test_build_is_idempotent(model_dir):
    from text.make_default_model import build

    marker = os.path.join(model_dir, ".complete")
    before = os.path.getmtime(os.path.join(model_dir, "tokenizer.json"))
    assert build(model_dir) == os.path.abspath(model_dir)
    assert os.path.exists(marker)
    assert os.path.getmtime(os.path.join(model_dir, "tokenizer.json")) == before
