"""The tool-call parser interface: whole outputs and streamed text deltas -> tool calls.

A family subclasses ``ToolParser`` (one module per family) and registers it by vLLM's
``--tool-call-parser`` name (``text.tool_parsers.registry``). One instance parses one choice: the
streaming state lives on it. Plain code over text: no Falcon, no gevent, no I/O.

Runs on: the thread that renders the response (the HTTP hub while streaming; a deferred body is
parsed once when the generation ends).
"""
from __future__ import annotations

import logging
from typing import Any, ClassVar, Mapping, Sequence

from text.parsed import DeltaParts, ExtractedToolCalls, ToolCallDelta


log = logging.getLogger("greenfront.tool_parsers")


class MissingMarkerTokens(ValueError):
    """The tokenizer lacks tokens the parser needs (vLLM refuses to start the same way)."""


class ToolParser:
    """Base of every tool-call parser.

    Class attributes:
        name: the registry name (vLLM's ``--tool-call-parser`` value).
        required_tokens: marker tokens the vocabulary must contain (checked when built).
        keep_special_tokens: when the request has tools (and ``tool_choice`` is not "none") the
            output is detokenized with ``skip_special_tokens`` false, as the vLLM parsers that
            need their special marker tokens ask (others see the text without them).
        supports_required_and_named: ``tool_choice`` "required"/named use the JSON schema of
            the calls; otherwise they fall back to this parser, as "auto" does.
        grammar_based: vLLM 0.32 implements the family on its grammar engine; then (with a
            grammar-based reasoning parser or none) an answer without calls, and any answer
            under ``tool_choice`` "none", keeps the parser's content (markers removed), not the
            raw text.

    Subclasses implement ``extract`` and ``_stream``; ``feed`` keeps the accumulated text.
    """

    name: ClassVar[str] = ""
    required_tokens: ClassVar[tuple[str, ...]] = ()
    keep_special_tokens: ClassVar[bool] = False
    supports_required_and_named: ClassVar[bool] = True
    grammar_based: ClassVar[bool] = False

    def __init__(self, vocab: Mapping[str, int], tools: Sequence[Mapping[str, Any]] | None = None
                 ) -> None:
        missing = [t for t in self.required_tokens if t not in vocab]
        if missing:
            raise MissingMarkerTokens(
                f"tool parser {self.name!r} needs the tokens {', '.join(missing)} in the "
                "tokenizer's vocabulary")
        self.vocab = vocab
        self.tools = list(tools or ())
        self.text = ""          # everything fed so far (vLLM's current_text)
        self.previous_text = ""  # before the latest delta
        self.token_ids: list[int] = []
        #: per call index: the arguments text streamed so far, and the whole arguments once known
        self.streamed_args: list[str] = []
        self.final_args: list[str | None] = []

    # -- whole outputs ---------------------------------------------------------------------------

    def extract(self, text: str) -> ExtractedToolCalls:
        """The calls in a finished output and the content around them."""
        raise NotImplementedError

    # -- streaming -------------------------------------------------------------------------------

    def feed(self, delta_text: str, delta_ids: Sequence[int] = ()) -> DeltaParts | None:
        """One text delta of the output; returns what to stream for it (None: nothing yet)."""
        self.previous_text = self.text
        self.text += delta_text
        self.token_ids.extend(delta_ids)
        try:
            return self._stream(delta_text, delta_ids)
        except Exception:  # noqa: BLE001
            # As vLLM's parsers do: a delta the parser fails on is logged and streams nothing;
            # the response goes on (a failure here must not break the stream).
            log.exception("%s tool parser failed on a streamed delta", self.name)
            return None

    def _stream(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        raise NotImplementedError

    def finish(self) -> str:
        """Arguments of the last call that were parsed but not yet streamed (sent with the
        finishing delta, as vLLM does when the output ends inside a call)."""
        if not self.final_args:
            return ""
        expected, sent = self.final_args[-1], self.streamed_args[-1]
        if expected is None or not expected.startswith(sent):
            return ""
        return expected[len(sent):]

    def flush(self) -> DeltaParts | None:
        """What the parser still holds when the output ends (held-back text, a call the output
        ends inside), streamed with the finishing delta; families that stream everything as it
        comes (or use ``finish``) hold nothing."""
        return None

    # -- helpers for subclasses ------------------------------------------------------------------

    def _open_call(self, index: int) -> None:
        while len(self.streamed_args) <= index:
            self.streamed_args.append("")
            self.final_args.append(None)

    def _args_delta(self, index: int, args_so_far: str) -> ToolCallDelta | None:
        """The fragment of ``args_so_far`` not streamed yet for call ``index`` (arguments only
        grow by appending; a rewrite of sent text yields nothing)."""
        self._open_call(index)
        sent = self.streamed_args[index]
        if len(args_so_far) <= len(sent) or not args_so_far.startswith(sent):
            return None
        self.streamed_args[index] = args_so_far
        return ToolCallDelta(index=index, arguments=args_so_far[len(sent):])


def parts(content: str | None, calls: list[ToolCallDelta]) -> DeltaParts | None:
    """A delta from optional content and call pieces; None when both are empty."""
    if not content and not calls:
        return None
    return DeltaParts(content=content or None, tool_calls=calls)
