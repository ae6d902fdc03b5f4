"""Per-request incremental detokenization and stop-string handling (docs/text-parity.md §2 and §3.2).

Owns: `IncrementalDetokenizer`, one per request choice. It turns the engine's output token ids
into text exactly as vLLM 0.32's frontend does:

- a `tokenizers.decoders.DecodeStream` pre-filled with the prompt ids is stepped once per output
  token (`None` counts as ""), which gives vLLM's handling of incomplete UTF-8 for free: a
  trailing partial character is held back and never emitted, a prompt ending in U+FFFD has its
  whole text copied into the output (docs/text-parity.md §2.2, §2.3); for a byte-level
  vocabulary, `text.byte_level.ByteLevelSteps` gives the same text from a table (§2.6);
- when the engine finished with STOP (EOS or a stop token id), that last token is not decoded
  unless `include_stop_str_in_output`;
- stop strings are searched only in the text added since the last step (or since token
  `min_tokens`), plus an overlap; the earliest-ending match wins; the text is cut before the
  match (or after it with `include_stop_str_in_output`), and tokens after the completing one in
  the same step are dropped;
- while unfinished, streamed deltas hold back `max(len(stop)) - 1` characters.

Called by the request's output handling: created on a request pool thread, then `update` and
`get_next_output_text` on every engine step. Not thread-safe: one owner at a time.
Runs on: request pool threads (creation) and the HTTP hub (updates; each step is microseconds).
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Sequence

from tokenizers.decoders import DecodeStream

from text.byte_level import ByteLevelSteps
from text.tokenizer import Tokenizer

log = logging.getLogger(__name__)

# Raised by tokenizers when a stream's decoded prefix stops being a prefix of the new text
# (non-monotonic UTF-8 repair). vLLM restarts the stream without the prompt in that case.
INVALID_PREFIX_MESSAGE = "Invalid prefix encountered"


#: Tokens of the prompt's tail that pre-fill the decode stream, and the window checked before it.
#: PERF: 4, not 16: the three checking decodes cost ~7 instead of ~23 us per request (a fifth of
#: the per-request extra CPU of the bench's tool chats). Four tokens still hold any UTF-8
#: character (at most 4 byte tokens); one cut inside a character fails the check.
PREFILL_WINDOW = 4
#: Prompts up to this many tokens pre-fill the stream whole (their decode is cheap anyway).
PREFILL_WHOLE_UP_TO = 64

#: Tokens from the end of a run checked for an ASCII-ending text before it is stepped one
#: token at a time (``DecodeStreamSteps.run``).
_RUN_END_CHECKS = 4


def stream_prefill(hf, prompt_token_ids: Sequence[int], skip_special_tokens: bool,
                   window: int | None = PREFILL_WINDOW) -> list[int]:
    """The prompt ids to pre-fill a request's DecodeStream with.

    PERF: a stream pre-filled with the whole prompt decodes all of it, twice, on its first step,
    holding the GIL (tokenizers' ``step`` does not release it): ~40 ms for an 82k-token prompt,
    in the HTTP hub. A short tail gives the same text whenever decoding is local at the cut:
    the ``window`` tokens before the cut and the tail decode to exactly their joint decode, and
    neither ends in U+FFFD (so the whole prompt's decode does not end in U+FFFD either, the
    case in which DecodeStream copies the entire prompt text into the output, docs/text-parity.md §2.3).
    Otherwise (or with ``window=None``) the whole prompt is used, exactly as vLLM does.
    """
    ids = prompt_token_ids
    if window is None or len(ids) <= max(PREFILL_WHOLE_UP_TO, 2 * window):
        return list(ids)
    head, tail = list(ids[-2 * window:-window]), list(ids[-window:])
    # PERF: three plain decodes (~7 us of CPU at a 4-token window, holding the GIL) rather
    # than one ``decode_batch``, which releases the GIL and runs on tokenizers' own thread
    # pool: 44 us of CPU alone, and under the bench's streaming load the request thread then
    # waited for the GIL back (up to the 5 ms switch interval) on every request with a prompt
    # over 64 tokens (a fifth of a pool thread's samples with tools in the prompt, py-spy).
    head_text, tail_text, joint = (hf.decode(part, skip_special_tokens=skip_special_tokens)
                                   for part in (head, tail, head + tail))
    if (joint == head_text + tail_text and not head_text.endswith("\ufffd")
            and not tail_text.endswith("\ufffd")):
        return tail
    return list(ids)


class IncrementalDetokenizer:
    """Output text and stop-string state of one request choice."""

    def __init__(self, tokenizer: Tokenizer, prompt_token_ids: Sequence[int], *,
                 skip_special_tokens: bool = True, spaces_between_special_tokens: bool = True,
                 stop: Sequence[str] = (), include_stop_str_in_output: bool = False,
                 min_tokens: int = 0, prefill_window: int | None = PREFILL_WINDOW) -> None:
        """Pre-fill the decode stream with the prompt (see ``stream_prefill``)."""
        self._stop = [stop] if isinstance(stop, str) else list(stop)
        self._include_stop = include_stop_str_in_output
        self._min_tokens = min_tokens
        # Streaming must not show the start of a stop string that a later token might complete.
        if self._stop and not include_stop_str_in_output:
            self._hold_back = max(len(s) for s in self._stop) - 1
        else:
            self._hold_back = 0
        self._sent_upto = 0
        self._token_ids: list[int] = []
        self._text = ""
        # Only when both flags are off does vLLM change anything: an added token right after
        # another one is rendered as its raw content (the DecodeStream steps handle that).
        raw_adjacent_added = not skip_special_tokens and not spaces_between_special_tokens
        vocab = tokenizer.byte_level
        self._steps: ByteLevelSteps | DecodeStreamSteps
        if vocab is not None and not raw_adjacent_added:
            self._steps = ByteLevelSteps(vocab, prompt_token_ids, bool(skip_special_tokens))
        else:
            self._steps = DecodeStreamSteps(tokenizer, prompt_token_ids, skip_special_tokens,
                                            raw_adjacent_added, prefill_window)

    # -- state ----------------------------------------------------------------------------------

    @property
    def output_text(self) -> str:
        """All text so far (cut at a matched stop string), without hold-back."""
        return self._text

    @property
    def token_ids(self) -> list[int]:
        """Output token ids accepted so far (the live list; do not mutate)."""
        return self._token_ids

    @property
    def num_output_tokens(self) -> int:
        return len(self._token_ids)

    # -- per step -------------------------------------------------------------------------------

    def update(self, new_token_ids: Sequence[int], stop_terminated: bool) -> str | None:
        """Take one engine step's tokens; return the matched stop string, if any.

        `stop_terminated`: the engine finished this request with STOP (EOS or a stop token id);
        the step's last token is then not decoded unless `include_stop_str_in_output`, though it
        is still counted.
        """
        if not new_token_ids:
            return None
        if not self._stop and not (stop_terminated and not self._include_stop):
            # PERF: the common step (no stop strings, nothing withheld) without the offsets'
            # bookkeeping: 0.47 -> 0.40 us per one-token step (a loop over ~800-token texts).
            self._token_ids.extend(new_token_ids)
            self._text += self._steps.run(new_token_ids)
            return None
        to_decode = list(new_token_ids)
        withheld = None
        if stop_terminated and not self._include_stop:
            withheld = to_decode.pop()

        prev_count = len(self._token_ids)
        # Text length after each new token, so a match can be mapped back to a token count.
        offsets = [len(self._text)] if self._stop else None
        if offsets is None:
            self._token_ids.extend(to_decode)
            self._text += self._steps.run(to_decode)
        else:
            step = self._steps.step
            for token_id in to_decode:
                self._token_ids.append(token_id)
                self._text += step(token_id)
                offsets.append(len(self._text))
        if withheld is not None:
            self._token_ids.append(withheld)
            if offsets is not None:
                offsets.append(len(self._text))

        if offsets is None or len(self._token_ids) <= self._min_tokens:
            return None
        # Only text produced after the first min_tokens tokens may complete a stop string.
        window_start = offsets[max(self._min_tokens - prev_count, 0)]
        match = self._find_stop(len(self._text) - window_start)
        if match is None:
            return None
        stop_str, start = match
        end = start + len(stop_str)
        # Keep the tokens up to the one whose text reaches the end of the match.
        kept = bisect_left(offsets, end, 1)
        del self._token_ids[prev_count + kept:]
        if self._include_stop:
            self._text = self._text[:end]
        else:
            self._text = self._text[:start]
        return stop_str

    def _find_stop(self, new_chars: int) -> tuple[str, int] | None:
        """Earliest-ending stop string that overlaps the last `new_chars` characters, with its
        start index; ties go to list order."""
        if new_chars <= 0:
            return None
        text = self._text
        best: tuple[str, int] | None = None
        best_end = 0
        for s in self._stop:
            # Start far enough back that a match ending inside the new text is found.
            from_index = max(len(text) + 1 - new_chars - len(s), 0)
            at = text.find(s, from_index)
            if at == -1:
                continue
            end = at + len(s)
            if best is None or end < best_end:
                best, best_end = (s, at), end
        return best

    def get_next_output_text(self, finished: bool, delta: bool) -> str:
        """Text to send now: the whole text, or with `delta` only what was not sent before.

        While unfinished the last `max(len(stop)) - 1` characters are held back.
        """
        hold = 0 if finished else self._hold_back
        if not delta:
            return self._text[:-hold] if hold else self._text
        upto = len(self._text) - hold
        start = self._sent_upto
        if start < upto:
            self._sent_upto = upto
            return self._text[start:upto]
        return ""


class DecodeStreamSteps:
    """The text each output token of one choice brings out, from a ``DecodeStream`` pre-filled
    with the prompt (any tokenizer). Owned by the HTTP hub after creation (a pool thread
    creates it)."""

    def __init__(self, tokenizer: Tokenizer, prompt_token_ids: Sequence[int],
                 skip_special_tokens: bool, raw_adjacent_added: bool,
                 prefill_window: int | None) -> None:
        self._hf = tokenizer.hf
        self._ascii_ends = tokenizer.ascii_ends[bool(skip_special_tokens)]
        self._skip_special_tokens = skip_special_tokens
        self._stream = DecodeStream(
            ids=stream_prefill(self._hf, prompt_token_ids, skip_special_tokens, prefill_window),
            skip_special_tokens=skip_special_tokens)
        self._raw_adjacent_added = raw_adjacent_added
        self._added_tokens: dict[int, str] = {}
        self._last_was_added = False
        if raw_adjacent_added:
            self._added_tokens = {i: t.content
                                  for i, t in self._hf.get_added_tokens_decoder().items()}
            if not self._added_tokens:
                self._raw_adjacent_added = False

    def run(self, ids: list[int]) -> str:
        """The text of several new tokens, exactly as stepping them one at a time gives it.

        The stream steps the longest head of ``ids`` that ends in a token whose own text ends
        in an ASCII character in one call, the rest one at a time. Stepped one by one, the
        last token of such a head always brings its text out (the decode then ends in a whole
        character), so the head's text is the same whether it was emitted token by token or
        at once; a head ending in a byte of a longer character would hold back text that the
        tokens before it had already brought out.
        PERF: a response that fell behind takes ~70 tokens at a time at 1,024 streams; stepped
        at once they cost ~1.0 instead of ~2.0 us each (the bench's tool-call text, in a loop).
        """
        if self._raw_adjacent_added or len(ids) == 1:
            return "".join([self.step(token_id) for token_id in ids])
        cut = self._run_head(ids)
        pieces = []
        if cut:
            try:
                pieces.append(self._stream.step(self._hf, ids[:cut]) or "")
            except (OverflowError, TypeError):
                cut = 0  # an id the stream cannot take (nothing was added): one at a time
            except Exception as e:
                if not str(e).startswith(INVALID_PREFIX_MESSAGE):
                    raise
                # vllm#17448, as in ``_step``: restart without the prompt, then one at a time.
                log.warning("decode stream reset after invalid prefix in a run of tokens")
                self._stream = DecodeStream(skip_special_tokens=self._skip_special_tokens)
                cut = 0
        pieces.extend(self.step(token_id) for token_id in ids[cut:])
        return "".join(pieces)

    def _run_head(self, ids: list[int]) -> int:
        """How many tokens of ``ids`` to step at once: up to the last of its final
        ``_RUN_END_CHECKS`` tokens whose own text ends in ASCII, or 0 (one at a time) when there
        is none, the head would be a single token, or an id cannot be decoded."""
        hf, skip, known = self._hf, self._skip_special_tokens, self._ascii_ends
        # PERF: each token's answer is decoded once per worker, then read from ``known``
        # (``_run_head`` was 3.1% of the HTTP hub's GIL samples, 2 workers at 1,024 streams;
        # 0.69 -> 0.34 us per 3-token run in a loop).
        try:
            for cut in range(len(ids), max(len(ids) - _RUN_END_CHECKS, 1), -1):
                token_id = ids[cut - 1]
                in_vocab = 0 <= token_id < len(known)
                answer = known[token_id] if in_vocab else 0
                if not answer:
                    text = hf.decode([token_id], skip_special_tokens=skip)
                    answer = 2 if text and text[-1] < "\x80" else 1
                    if in_vocab:
                        known[token_id] = answer
                if answer == 2:
                    return cut
        except (OverflowError, TypeError):  # an id no stream can take
            pass
        return 0

    def step(self, token_id: int) -> str:
        piece = self._step(token_id)
        if self._raw_adjacent_added:
            content = self._added_tokens.get(token_id)
            if content is not None and self._last_was_added:
                piece = content
            self._last_was_added = content is not None
        return piece or ""

    def _step(self, token_id: int) -> str | None:
        try:
            return self._stream.step(self._hf, token_id)
        except (OverflowError, TypeError):
            # vLLM logs and emits nothing for ids the stream cannot take (vllm#21951).
            log.exception("invalid token id %r in decode stream", token_id)
            return None
        except Exception as e:
            if not str(e).startswith(INVALID_PREFIX_MESSAGE):
                raise
            # vllm#17448: restart without the prompt and retry the token.
            log.warning("decode stream reset after invalid prefix at token %r", token_id)
            self._stream = DecodeStream(skip_special_tokens=self._skip_special_tokens)
            return self._stream.step(self._hf, token_id)
