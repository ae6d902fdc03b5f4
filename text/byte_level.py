"""Each token's bytes and text in a byte-level vocabulary: the detokenizer's fast path
(docs/text-parity.md §2.6).

Owns: `ByteLevelVocab`, one per `Tokenizer` whose decoder is `ByteLevel` (GPT-2's scheme:
Llama 3, Qwen, Mistral's Tekken). Such a tokenizer decodes ids by turning each token's
characters back into bytes (a token with a character outside the 256 stand-ins gives its own
UTF-8 bytes), joining them, and decoding the join as UTF-8 with U+FFFD for each broken
sequence; special tokens are left out when skipped, ids without a token give nothing. That
makes decoding a concatenation, which the detokenizer exploits (`ByteLevelSteps`): a token whose
bytes are whole characters adds its own text, read from a table, instead of a DecodeStream step
(two decodes through the tokenizer).

Runs on: the HTTP hub fills the tables (`text`, `token_bytes` with ``cache``); request pool
threads only read a token's bytes without caching (`prompt_pending`).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import tokenizers
from tokenizers import decoders

log = logging.getLogger(__name__)

#: Token ids past this bound cannot reach the tokenizer at all (it takes u32).
_U32 = 1 << 32


def _stand_ins() -> dict[str, int]:
    """The printable character that stands for each byte value in a byte-level vocabulary:
    printable Latin-1 bytes stand for themselves, the other 68 take the code points from 256
    up, in byte order."""
    printable = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    chars: dict[str, int] = {}
    shifted = 0
    for value in range(256):
        if value in printable:
            chars[chr(value)] = value
        else:
            chars[chr(256 + shifted)] = value
            shifted += 1
    return chars


_STAND_INS = _stand_ins()
_TO_LATIN1 = str.maketrans({char: chr(value) for char, value in _STAND_INS.items()})
_OUTSIDE = re.compile("[^" + re.escape("".join(_STAND_INS)) + "]")


def _token_bytes(token: str) -> bytes:
    """The bytes ``ByteLevel`` decodes one vocabulary string to."""
    if _OUTSIDE.search(token):
        return token.encode("utf-8")
    return token.translate(_TO_LATIN1).encode("latin-1")


class ByteLevelVocab:
    """Per token id and ``skip_special_tokens``: its bytes, and its text when the bytes are whole
    characters. Filled lazily, as tokens are met.

    Owned by the HTTP hub (the one thread that writes the tables); any thread may call
    `prompt_pending`, which reads the tables and the tokenizer but writes nothing.
    """

    def __init__(self, hf: tokenizers.Tokenizer, vocab_size: int) -> None:
        self.size = vocab_size
        self._id_to_token = hf.id_to_token
        self._special = {t.content for t in hf.get_added_tokens_decoder().values() if t.special}
        #: per ``skip_special_tokens`` (0: False, 1: True): the token's text, or None while not
        #: known or when its bytes end inside a character or hold a broken one.
        self.texts: tuple[list[str | None], list[str | None]] = ([None] * vocab_size,
                                                                 [None] * vocab_size)
        self._bytes: tuple[list[bytes | None], list[bytes | None]] = ([None] * vocab_size,
                                                                      [None] * vocab_size)

    @classmethod
    def of(cls, hf: tokenizers.Tokenizer, vocab_size: int) -> ByteLevelVocab | None:
        """The vocabulary of ``hf`` when its decoder is exactly ``ByteLevel``, else None."""
        return cls(hf, vocab_size) if type(hf.decoder) is decoders.ByteLevel else None

    def token_bytes(self, token_id: int, skip: bool, cache: bool = True) -> bytes:
        """What ``token_id`` adds to a decode's bytes (nothing for a skipped special token or an
        id without a token). ``cache`` only on the HTTP hub."""
        if not 0 <= token_id < self.size:
            return b""
        known = self._bytes[skip][token_id]
        if known is not None:
            return known
        token = self._id_to_token(token_id)
        raw = b"" if token is None or (skip and token in self._special) else _token_bytes(token)
        if cache:
            self._bytes[skip][token_id] = raw
            text = raw.decode("utf-8", "replace")
            if "\ufffd" not in text:
                self.texts[skip][token_id] = text
        return raw

    def text(self, token_id: int, skip: bool) -> str | None:
        """The token's own text when its bytes are whole characters (``""`` for a skipped
        special token), else None. HTTP hub only."""
        text = self.texts[skip][token_id]
        if text is None and self._bytes[skip][token_id] is None:
            self.token_bytes(token_id, skip)
            text = self.texts[skip][token_id]
        return text

    def prompt_pending(self, prompt_token_ids: Sequence[int], skip: bool) -> bytes:
        """The bytes a stream pre-filled with the prompt still holds back: none, unless the
        prompt's decoded text ends in U+FFFD, in which case all of them (its first step then
        brings out the whole prompt text, docs/text-parity.md §2.3). Any thread."""
        tail = b""
        at = len(prompt_token_ids)
        # The last 4 bytes hold the last character's first byte, and decoding from any byte
        # before it ends the same way.
        while at and len(tail) < 4:
            at -= 1
            tail = self.token_bytes(int(prompt_token_ids[at]), skip, cache=False) + tail
        if not tail.decode("utf-8", "replace").endswith("\ufffd"):
            return b""
        return b"".join(self.token_bytes(int(t), skip, cache=False) for t in prompt_token_ids)


class ByteLevelSteps:
    """The text each output token of one choice brings out, as a DecodeStream pre-filled with
    the prompt gives it, for a byte-level vocabulary.

    The stream brings out text whenever its decode grows and does not end in U+FFFD; it then
    stands on a whole character, where UTF-8 decoding starts afresh, so what it brings out is
    the decode of the bytes added since it last did (``_pending``). When nothing is pending and
    the token's bytes are whole characters, that is the token's own text, from the table.
    Owned by the HTTP hub after creation (a pool thread creates it).
    """

    __slots__ = ("_vocab", "_texts", "_skip", "_size", "_pending")

    def __init__(self, vocab: ByteLevelVocab, prompt_token_ids: Sequence[int], skip: bool) -> None:
        self._vocab = vocab
        self._texts = vocab.texts[skip]
        self._skip = skip
        self._size = vocab.size
        self._pending = vocab.prompt_pending(prompt_token_ids, skip)

    def run(self, ids: Sequence[int]) -> str:
        """The text of several tokens, as stepping them one at a time gives it."""
        texts, size = self._texts, self._size
        pieces = []
        for token_id in ids:
            # PERF: the common token is one list read (~0.1 us in a loop against ~1-2 us for
            # a DecodeStream step, bench/RESULTS.md §6.2.3).
            if not self._pending and 0 <= token_id < size:
                piece = texts[token_id]
                if piece is not None:
                    pieces.append(piece)
                    continue
            pieces.append(self.step(token_id))
        return "".join(pieces)

    def step(self, token_id: int) -> str:
        """The text one token brings out (``""`` while a character is incomplete)."""
        if not 0 <= token_id < _U32:
            # vLLM logs and emits nothing for ids the stream cannot take (vllm#21951).
            log.error("invalid token id %r in decode stream", token_id)
            return ""
        vocab = self._vocab
        if not self._pending and token_id < self._size:
            text = vocab.text(token_id, self._skip)
            if text is not None:
                return text
        self._pending += vocab.token_bytes(token_id, self._skip)
        text = self._pending.decode("utf-8", "replace")
        if text and not text.endswith("\ufffd"):
            self._pending = b""
            return text
        return ""
