"""Prompt tokenization and full-sequence decoding for one model.

Owns: `Tokenizer`, a thread-safe wrapper over the model's `tokenizer.json`. Encoding runs on
either `fastokens` (default, much faster on long prompts) or Hugging Face `tokenizers`; both give
identical ids, including the BOS the post-processor adds. Decoding always goes through Hugging
Face `tokenizers`, because vLLM decodes with it and the bytes must match (docs/text-parity.md §2.5).

Every call that does real work uses a `*_batch` entry point, even for one input: those release
the GIL while the native code runs, so a tokenization on a pool thread does not stall the HTTP hub
(docs/architecture.md §5.1; a 300k-character `encode` would otherwise hold the GIL for ~0.3-0.5 s).

Called by the completion/chat/tokenize resources (encode, decode) and by the detokenizer
(`hf` for DecodeStream). Runs on: request pool threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tokenizers

from text.byte_level import ByteLevelVocab
from text.model_dir import ModelFiles
from base.token_ids import TokenIds

BACKENDS = ("fastokens", "hf")


class Tokenizer:
    """Thread-safe tokenizer for one model directory; share one instance across threads."""

    def __init__(self, hf: tokenizers.Tokenizer, encoder: Any, backend: str,
                 bos_token_id: int | None, eos_token_id: int | None) -> None:
        self._hf = hf
        self._encoder = encoder
        self._backend = backend
        self._bos_token_id = bos_token_id
        self._eos_token_id = eos_token_id
        vocab = hf.get_vocab(with_added_tokens=True)
        # vLLM's bound for "Token id N is out of vocabulary": the largest id + 1.
        self._vocab_size = max(hf.get_vocab_size(with_added_tokens=True), max(vocab.values()) + 1)
        # vLLM's character pre-check multiplies max_model_len by the longest vocabulary string
        # (byte-level form, added tokens included), docs/text-parity.md §4.1.
        self._max_chars_per_token = max(len(token) for token in vocab)
        #: per ``skip_special_tokens`` (index 0: False, 1: True), whether each token's own text
        #: ends in an ASCII character: 0 not known yet, 1 no, 2 yes. The detokenizer's run check
        #: (``text/detokenizer.py``) fills it as it meets tokens. Written only by the HTTP hub
        #: (the one thread that updates detokenizers); one byte per token and flag.
        self.ascii_ends = (bytearray(self._vocab_size), bytearray(self._vocab_size))
        #: Each token's bytes and text when the decoder is byte-level (the detokenizer's fast
        #: path), else None. Its tables are written only by the HTTP hub.
        self.byte_level: ByteLevelVocab | None = ByteLevelVocab.of(hf, self._vocab_size)

    @classmethod
    def load(cls, model_dir: str, backend: str = "fastokens") -> Tokenizer:
        """Load `model_dir/tokenizer.json`; `backend` picks the encoder ("fastokens" or "hf")."""
        if backend not in BACKENDS:
            raise ValueError(f"unknown tokenizer backend {backend!r}; expected one of {BACKENDS}")
        files = ModelFiles.load(model_dir)
        return cls.from_files(files, backend)

    @classmethod
    def from_files(cls, files: ModelFiles, backend: str = "fastokens") -> Tokenizer:
        """Build from an already loaded `ModelFiles`."""
        if backend not in BACKENDS:
            raise ValueError(f"unknown tokenizer backend {backend!r}; expected one of {BACKENDS}")
        hf = tokenizers.Tokenizer.from_file(files.tokenizer_json_path)
        # Truncation and padding are the callers' business (on id lists); a tokenizer.json that
        # enables them would silently change ids.
        hf.no_truncation()
        hf.no_padding()
        if backend == "fastokens":
            import fastokens

            encoder = fastokens.Tokenizer.from_file(files.tokenizer_json_path)
            encoder.no_truncation()
            encoder.no_padding()
        else:
            encoder = hf
        bos = hf.token_to_id(files.bos_token) if files.bos_token else None
        eos = hf.token_to_id(files.eos_token) if files.eos_token else None
        return cls(hf, encoder, backend, bos, eos)

    # -- encoding -------------------------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        """Token ids of `text` as a list. Thread-safe; the GIL is released while the encoder runs.

        `add_special_tokens=True` applies the post-processor (`<s> $A` here), as vLLM does for
        completion prompts; chat prompts pass False because the template wrote the BOS.
        """
        return self._encoder.encode_batch([text], add_special_tokens=add_special_tokens)[0].ids

    def encode_many(self, texts: Sequence[str], add_special_tokens: bool) -> list[Sequence[int]]:
        """`encode` for several texts in one native call (parallel inside the encoder).

        With fastokens each prompt's ids come back as a ``TokenIds`` buffer, never as Python
        ints: `encode_batch` built 82k-id Encoding objects with the GIL held (~1.8 ms per
        300k-character prompt under `py-spy --gil`), `encode_batch_flat` returns two byte
        strings. With `hf`, lists."""
        if not texts:
            return []
        if self._backend == "fastokens":
            flat, offsets = self._encoder.encode_batch_flat(
                list(texts), add_special_tokens=add_special_tokens)
            ids = TokenIds.from_u32_bytes(flat)
            bounds = TokenIds.from_u64_offsets(offsets)
            return [TokenIds(ids.array[bounds[i]:bounds[i + 1]]) for i in range(len(texts))]
        encodings = self._encoder.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        return [e.ids for e in encodings]

    # -- decoding -------------------------------------------------------------------------------

    def decode(self, ids: Sequence[int], skip_special_tokens: bool) -> str:
        """Text of `ids` exactly as vLLM's `tokenizer.decode` gives it (no clean-up of spaces).

        Ids outside the vocabulary decode to nothing. Thread-safe; releases the GIL.
        """
        return self._hf.decode_batch([list(ids)], skip_special_tokens=skip_special_tokens)[0]

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str | None]:
        """Raw vocabulary strings (`"Ġworld"`, `"<s>"`), None for unknown ids (`/tokenize`)."""
        id_to_token = self._hf.id_to_token
        return [id_to_token(i) for i in ids]

    def token_to_id(self, token: str) -> int | None:
        return self._hf.token_to_id(token)

    # -- properties -----------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of ids including added tokens (131072 for the default model)."""
        return self._vocab_size

    @property
    def bos_token_id(self) -> int | None:
        return self._bos_token_id

    @property
    def eos_token_id(self) -> int | None:
        return self._eos_token_id

    @property
    def max_chars_per_token(self) -> int:
        return self._max_chars_per_token

    @property
    def hf(self) -> tokenizers.Tokenizer:
        """The Hugging Face tokenizer; the detokenizer's DecodeStream steps against it."""
        return self._hf

    @property
    def backend(self) -> str:
        return self._backend

    def __repr__(self) -> str:
        return f"Tokenizer(backend={self._backend!r}, vocab_size={self._vocab_size})"

