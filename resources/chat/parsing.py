"""The per-choice chat output pipeline: reasoning parser first, then the tool parser on the
content, whole outputs (``ChoiceParser.final``) and streamed deltas (``ChoiceParser.delta``).

Observable behaviour of vLLM 0.32's serving layer, restated:
- a reasoning parser (when configured) takes the output until the thought ends (or from the
  start when the prompt already closed it); the rest goes to the tool parser;
- ``tool_choice`` "none" (or a request without tools) leaves the content as it is; "auto" runs the
  tool parser; "required" and a named function were constrained to JSON by the engine
  (``resources.chat.tool_choice``) and that JSON is read back here, unless the parser reads
  those from its own format;
- ``finish_reason`` becomes "tool_calls" when "auto" found calls or "required" stopped normally
  (streamed: when any call was streamed and the choice is not a named one);
- ``parallel_tool_calls: false`` keeps the first call only; ``include_reasoning: false`` drops
  the reasoning.

``ChatParsing`` is built per request in conversion (request pool) and is immutable; a
``ChoiceParser`` holds one choice's parser instances and streaming state.

Runs on: the HTTP hub (renderers), one ``ChoiceParser`` per choice, never shared.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from text.output_parsers import OutputParsers
from text.parsed import DeltaParts, ToolCall
from resources.chat import tool_choice as forced


@dataclass(frozen=True)
class ChatParsing:
    """What one request asks of the output parsers.

    Attributes:
        parsers: the server's parser classes.
        tools: the request's tools (None when absent).
        tool_choice: "none", "auto", "required", or the named function's name in ``named``.
        named: the function a named ``tool_choice`` forces, else None.
        parallel_tool_calls: False keeps only the first call.
        include_reasoning: False drops reasoning from the answer.
        template_kwargs: the chat template kwargs (``enable_thinking`` reaches the parsers).
        eos_ids: end-of-sequence ids, never counted as reasoning tokens.
    """

    parsers: OutputParsers
    tools: list[dict] | None
    tool_choice: str
    named: str | None = None
    parallel_tool_calls: bool | None = True
    include_reasoning: bool = True
    template_kwargs: dict = field(default_factory=dict)
    eos_ids: frozenset = frozenset()

    @property
    def forced_json(self) -> bool:
        """"required"/named calls come as JSON the engine was constrained to."""
        tool = self.parsers.tool_parser
        return (tool is not None and tool.supports_required_and_named
                and (self.named is not None or self.tool_choice == "required"))

    @property
    def auto(self) -> bool:
        """The tool parser reads the calls from the model's own format."""
        if self.parsers.tool_parser is None or self.tool_choice == "none":
            return False
        return self.tool_choice == "auto" or not self.forced_json


@dataclass
class ParsedMessage:
    """A finished choice: the message's reasoning, content and calls."""

    reasoning: str | None
    content: str | None
    tool_calls: list[ToolCall] | None
    finish_reason: str


class ChoiceParser:
    """One choice's reasoning and tool parsers, whole or streamed."""

    def __init__(self, setup: ChatParsing, prompt_ids: Sequence[int]) -> None:
        parsers = setup.parsers
        self.setup = setup
        self.reasoning = (parsers.reasoning_parser(parsers.vocab, setup.template_kwargs)
                          if parsers.reasoning_parser is not None else None)
        self.tools = (parsers.tool_parser(parsers.vocab, setup.tools)
                      if parsers.tool_parser is not None else None)
        self.reasoning_ended = (self.reasoning is None
                                or self.reasoning.prompt_ends_reasoning(prompt_ids))
        self.forced = forced.ForcedCallStream(setup.named) if setup.forced_json else None
        self.tools_streamed = False
        # vLLM keeps the parser's content (markers removed) when both parsers run on its
        # grammar engine.
        self.parser_content = (self.tools is not None and self.tools.grammar_based
                               and (self.reasoning is None or self.reasoning.grammar_based))

    # -- whole outputs ---------------------------------------------------------------------------

    def final(self, text: str, finish_reason: str) -> ParsedMessage:
        """The message of a finished choice (``tool_calls`` None: the key is left out)."""
        setup = self.setup
        reasoning, content = (None, text) if self.reasoning is None else self.reasoning.extract(text)
        if not setup.include_reasoning:
            reasoning = None
        calls: list[ToolCall] | None = None
        forced_choice = setup.named is not None or setup.tool_choice == "required"
        if self.tools is not None and setup.tool_choice == "none" and self.parser_content:
            content = self.tools.extract(content or "").content
        elif self.tools is not None and setup.tool_choice != "none":
            if setup.forced_json:
                calls, content = forced.parse_forced(content, setup.named), None
            else:
                found = self.tools.extract(content or "")
                if found.called:
                    calls, content = found.calls, found.content
                    if content is not None and not content.strip():
                        content = None
                elif forced_choice and not (content or "").strip():
                    calls, content = [], None
                elif self.parser_content:
                    content = found.content or None
        if forced_choice:
            content, calls = content or "", calls or []
        elif not calls:
            calls = None
        if calls and setup.parallel_tool_calls is False:
            calls = calls[:1]
        called = ((setup.tool_choice == "auto" and bool(calls))
                  or (setup.tool_choice == "required" and finish_reason == "stop"))
        return ParsedMessage(reasoning, content, calls, "tool_calls" if called else finish_reason)

    # -- streaming -------------------------------------------------------------------------------

    def delta(self, text: str, ids: Sequence[int], finished: bool) -> DeltaParts | None:
        """What to stream for one text delta (None: nothing for now)."""
        out: DeltaParts | None = None
        transitioned = False
        if not self.reasoning_ended:
            out = self.reasoning.feed(text, ids)
            if self.reasoning.ended:
                self.reasoning_ended = transitioned = True
                text = (out.content if out is not None else None) or ""
                ids = self.reasoning.content_ids(ids)
        if self.reasoning_ended and self.tools is not None:
            thought = out.reasoning if out is not None else None
            out = self._tool_delta(text, ids)
            if thought:
                out = out or DeltaParts()
                out.reasoning = out.reasoning or thought
            if out is not None and out.tool_calls:
                self.tools_streamed = True
        elif self.reasoning_ended and not transitioned:
            out = DeltaParts(content=text)
        if finished and out is not None and out.tool_calls and self.tools is not None:
            last = out.tool_calls[-1]
            rest = self.forced.finish() if self.forced is not None else self.tools.finish()
            if rest:
                last.arguments = (last.arguments or "") + rest
        if finished and self.reasoning_ended:
            out = _joined(out, self._flushed())
        elif finished:
            out = _joined(out, self.reasoning.flush())
        if out is not None and not self.setup.include_reasoning:
            out.reasoning = None
            if not out.content and not out.tool_calls:
                out = None
        if out is not None and out.tool_calls and self.setup.parallel_tool_calls is False:
            out.tool_calls = [call for call in out.tool_calls if call.index == 0]
        return out

    def _flushed(self) -> DeltaParts | None:
        """What the tool parser still holds at the end of the output (None: nothing)."""
        setup = self.setup
        if self.tools is None or self.forced is not None:
            return None
        if setup.tool_choice == "none":
            if not self.parser_content:
                return None
            more = self.tools.flush()
            if more is not None:
                more.tool_calls = []
            return more
        return self.tools.flush() if setup.auto else None

    def _tool_delta(self, text: str, ids: Sequence[int]) -> DeltaParts | None:
        setup = self.setup
        if setup.tool_choice == "none":
            if self.parser_content:
                out = self.tools.feed(text, ids)
                if out is not None:
                    out.tool_calls = []
                return out
            return DeltaParts(content=text) if text else None
        if self.forced is not None:
            return self.forced.feed(text)
        return self.tools.feed(text, ids)

    def stream_finish_reason(self, finish_reason: str) -> str:
        """The streamed finish reason: "tool_calls" once calls were streamed (not named)."""
        if self.tools_streamed and self.setup.named is None and finish_reason == "stop":
            return "tool_calls"
        return finish_reason

    def reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        if self.reasoning is None:
            return 0
        eos = self.setup.eos_ids
        return self.reasoning.count_reasoning_tokens([t for t in token_ids if t not in eos])


def _joined(out: DeltaParts | None, more: DeltaParts | None) -> DeltaParts | None:
    """``out`` with a parser's flushed rest appended (content, reasoning, further call pieces)."""
    if more is None:
        return out
    if out is None:
        return more
    if more.content:
        out.content = (out.content or "") + more.content
    if more.reasoning:
        out.reasoning = (out.reasoning or "") + more.reasoning
    out.tool_calls = out.tool_calls + more.tool_calls
    return out


def delta_json(parts: DeltaParts) -> dict[str, Any]:
    """A stream chunk's ``delta`` (vLLM's key order: reasoning, content, tool_calls)."""
    out: dict[str, Any] = {}
    if parts.reasoning is not None:
        out["reasoning"] = parts.reasoning
    if parts.content is not None or parts.tool_calls:
        out["content"] = parts.content
    if parts.tool_calls:
        calls = []
        for call in parts.tool_calls:
            item: dict[str, Any] = {}
            if call.id is not None:
                item["id"] = call.id
                item["type"] = "function"
            item["index"] = call.index
            function = {}
            if call.name is not None:
                function["name"] = call.name
            if call.arguments is not None:
                function["arguments"] = call.arguments
            item["function"] = function
            calls.append(item)
        out["tool_calls"] = calls
    return out
