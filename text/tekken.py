"""Conversion of a Mistral "Tekken" tokenizer file into a Hugging Face `tokenizer.json` document.

Owns: reading the Tekken JSON (base64 byte tokens ordered by rank, a split regex, the special
token count), and producing the equivalent byte-level BPE description that `tokenizers` and
`fastokens` load. The result encodes and decodes exactly like the reference model that
`interop/make_tiny_model.py` built with transformers' converter:

- ids 0..N-1 are the N special (control) tokens, all `special: true`;
- id N + r is the Tekken token of rank r, written in the GPT-2 byte-to-unicode alphabet, for the
  first `default_vocab_size - N` ranks;
- merges are derived from the ranks: a token of rank r is reachable from every split of its bytes
  into two in-vocabulary halves; merges are ordered by the merged token's rank, then by the ids of
  the left and right halves. Together with `ignore_merges` this makes BPE pick the same tokens as
  a rank-based (tiktoken-style) encoder;
- pre-tokenizer: the Tekken split regex (isolated matches) then a regex-free ByteLevel mapping;
  decoder: ByteLevel; post-processor: `<s> $A` (BOS prepended when special tokens are added).

Called by `text.make_default_model` (at build time, `make`), never at request time.
Runs on: the build step (a plain process, no hub).
"""

from __future__ import annotations

import base64
import json
from typing import Any

# NOTE: the Tekken file used here predates the in-file `special_tokens` list; the readers fall
# back to this fixed table for the first ranks and `<SPECIAL_i>` for the rest. This is data (the
# names of Mistral's control tokens), restated here so we never import mistral_common.
DEFAULT_SPECIAL_TOKENS: tuple[str, ...] = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]",
    "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)
FILLER_SPECIAL_TEMPLATE = "<SPECIAL_{}>"
BOS_TOKEN = "<s>"


def byte_alphabet() -> list[str]:
    """The GPT-2 byte-level alphabet: the printable character standing for each byte value.

    Printable Latin-1 bytes stand for themselves; the other 68 byte values are given the code
    points 256, 257, ... in increasing byte order, so every byte has a visible, unique stand-in.
    """
    printable = set(range(ord("!"), ord("~") + 1))
    printable |= set(range(ord("¡"), ord("¬") + 1))
    printable |= set(range(ord("®"), ord("ÿ") + 1))
    table: list[str] = []
    extra = 0
    for b in range(256):
        if b in printable:
            table.append(chr(b))
        else:
            table.append(chr(256 + extra))
            extra += 1
    return table


def special_token_names(tekken: dict[str, Any]) -> list[str]:
    """Names of the control tokens, index = id, as the Tekken file defines them."""
    count = int(tekken["config"]["default_num_special_tokens"])
    names = [FILLER_SPECIAL_TEMPLATE.format(i) for i in range(count)]
    listed = tekken.get("special_tokens")
    if listed:
        for entry in listed:
            if entry["rank"] < count:
                names[entry["rank"]] = entry["token_str"]
    else:
        for i, name in enumerate(DEFAULT_SPECIAL_TOKENS[:count]):
            names[i] = name
    return names


def _rank_bytes(tekken: dict[str, Any], keep: int) -> list[bytes]:
    """The first `keep` Tekken tokens as raw bytes, index = rank."""
    entries = sorted(tekken["vocab"], key=lambda e: e["rank"])[:keep]
    for i, entry in enumerate(entries):
        if entry["rank"] != i:
            raise ValueError(f"Tekken ranks are not contiguous at {i}")
    return [base64.b64decode(e["token_bytes"]) for e in entries]


def _derive_merges(tokens: list[bytes]) -> list[tuple[int, int]]:
    """Merge pairs (as ranks) that let BPE rebuild each multi-byte token, in priority order.

    For the token of rank r every split into two halves that are both tokens yields a merge; the
    lists are emitted in rank order of the merged token and, within one token, by (left, right)
    rank. Ranks are monotone with ids, so sorting by rank sorts by id.
    """
    rank_of = {tok: r for r, tok in enumerate(tokens)}
    merges: list[tuple[int, int]] = []
    for tok in tokens:
        if len(tok) < 2:
            continue
        pairs = []
        for cut in range(1, len(tok)):
            left = rank_of.get(tok[:cut])
            if left is None:
                continue
            right = rank_of.get(tok[cut:])
            if right is not None:
                pairs.append((left, right))
        pairs.sort()
        merges.extend(pairs)
    return merges


def _vocab_and_merges(tekken: dict[str, Any],
                      specials: list[str]) -> tuple[dict[str, int], list[list[str]]]:
    """The BPE vocabulary (the special tokens first, then the ranks, in the byte alphabet) and
    the merges that rebuild each rank from two others."""
    num_special = len(specials)
    vocab_size = int(tekken["config"]["default_vocab_size"])
    tokens = _rank_bytes(tekken, vocab_size - num_special)

    alphabet = byte_alphabet()
    as_text = ["".join(alphabet[b] for b in tok) for tok in tokens]

    vocab: dict[str, int] = {name: i for i, name in enumerate(specials)}
    for rank, text in enumerate(as_text):
        if text in vocab:
            raise ValueError(f"Tekken token of rank {rank} collides with {text!r}")
        vocab[text] = num_special + rank
    merges = [[as_text[a], as_text[b]] for a, b in _derive_merges(tokens)]
    return vocab, merges


def convert_tekken(tekken: dict[str, Any]) -> dict[str, Any]:
    """Build the `tokenizer.json` document (a plain dict) for a parsed Tekken file."""
    config = tekken["config"]
    specials = special_token_names(tekken)
    vocab, merges = _vocab_and_merges(tekken, specials)
    bos_id = vocab[BOS_TOKEN]
    added_tokens = [
        {"id": i, "content": name, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, name in enumerate(specials)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": config["pattern"]},
                 "behavior": "Isolated", "invert": False},
                # The regex already split the text; ByteLevel only maps bytes to the alphabet.
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                 "use_regex": False},
            ],
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": BOS_TOKEN, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": BOS_TOKEN, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}}],
            "special_tokens": {BOS_TOKEN: {"id": BOS_TOKEN, "ids": [bos_id], "tokens": [BOS_TOKEN]}},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            # A pre-token that is itself a vocabulary entry is used whole, as a rank-based
            # encoder would; without this BPE could stop at a different split.
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }


def load_tekken(path: str) -> dict[str, Any]:
    """Parse a Tekken JSON file."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)
