"""A small marker-grammar machine for the tool formats vLLM 0.32 implements on its parser engine
(qwen3_xml/qwen3_coder, glm45/glm47, kimi_k2, minimax_m2): a lexer over literal markers, a state
table ``(state, marker) -> (next state, events)``, and the events turned into streamed deltas or
a finished output's calls.

Observable behaviour of vLLM 0.32's engine families, restated (learned from their answers):
- the text is cut at the family's markers (earliest first, the longest at one place); a suffix
  that may be the start of a marker is held back until it is decided;
- in the ``name`` state text is the call's name, in ``args`` the call's raw argument text (some
  markers are kept in it, for the family's converter); in ``preamble``/``between`` it is dropped;
- a call is announced (id, name) with its first argument piece; XML-ish families convert the raw
  text to a JSON object on each piece (values typed by the tool's schema) and stream the part of
  it that can no longer change: a trailing value only when it is a string the schema keeps as a
  string; the whole object when the call ends;
- streamed content after a call's start in the same delta waits for a delta without call pieces;
  whitespace-only content before anything else is held back, and dropped once a call started;
- a finished output's content is stripped when it has calls (or only dropped when it is all
  whitespace, per family).

Runs on: the response-rendering thread (one instance per choice; plain code over text).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

from text.parsed import DeltaParts, ExtractedToolCalls, ToolCall, ToolCallDelta
from text.tool_parsers.base import ToolParser
from text.tool_parsers.ids import new_call_id
from text.tool_parsers.schema_types import coerce_arguments, streamable_string_keys
from text.tool_parsers.json_scan import stable_prefix

CONTENT, PREAMBLE, NAME, ARGS, BETWEEN = "content", "preamble", "name", "args", "between"
START, END, ARG = "start", "end", "arg"   # events a transition emits


@dataclass(frozen=True)
class Grammar:
    """One family's format.

    Attributes:
        terminals: marker name -> its literal text.
        transitions: (state, marker name) -> (next state, events); a marker with no transition in
            the current state is plain text of that state.
        converter: raw argument text (and whether it is partial) -> a JSON object string; None:
            the raw text is JSON already and streams as it comes.
        validate_names: drop calls whose name is not one of the request's tools.
        strip_content: strip a finished output's content when it has calls (else only drop it
            when it is all whitespace).
    """

    terminals: dict[str, str]
    transitions: dict[tuple[str, str], tuple[str, tuple[str, ...]]]
    converter: Callable[[str, bool], str] | None = None
    validate_names: bool = False
    strip_content: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "_literals", sorted(set(self.terminals.values()),
                                                     key=len, reverse=True))
        object.__setattr__(self, "_by_literal", {v: k for k, v in self.terminals.items()})


class Lexer:
    """Cuts text into (marker name or None, text) pieces, holding back undecided suffixes."""

    def __init__(self, grammar: Grammar) -> None:
        self.literals: list[str] = grammar._literals  # type: ignore[attr-defined]
        self.by_literal: dict[str, str] = grammar._by_literal  # type: ignore[attr-defined]
        self.firsts = frozenset(lit[0] for lit in self.literals)
        self.buffer = ""

    def feed(self, text: str, final: bool = False) -> list[tuple[str | None, str]]:
        buf = self.buffer + text
        out: list[tuple[str | None, str]] = []
        pos = 0
        while True:
            at, literal, undecided = self._next_marker(buf, pos, final)
            if undecided is not None:
                if undecided > pos:
                    out.append((None, buf[pos:undecided]))
                self.buffer = buf[undecided:]
                return out
            if literal is None:
                if pos < len(buf):
                    out.append((None, buf[pos:]))
                self.buffer = ""
                return out
            if at > pos:
                out.append((None, buf[pos:at]))
            out.append((self.by_literal[literal], literal))
            pos = at + len(literal)

    def _next_marker(self, buf: str, pos: int, final: bool
                     ) -> tuple[int, str | None, int | None]:
        """(where, which literal, where an undecided suffix starts) of the next marker."""
        for at in range(pos, len(buf)):
            if buf[at] not in self.firsts:
                continue
            rest = buf[at:]
            match = next((lit for lit in self.literals if rest.startswith(lit)), None)
            longer = (not final) and any(len(lit) > len(rest) and lit.startswith(rest)
                                         for lit in self.literals)
            if longer:
                return at, None, at
            if match is not None:
                return at, match, None
        return len(buf), None, None


@dataclass
class _Slot:
    name: str = ""
    args: str = ""
    id: str | None = None
    own_id: str | None = None  # the id the model wrote (Kimi), kept as the call's id
    announced: bool = False
    streamed: str = ""
    string_keys: set[str] | None = None


@dataclass
class _Batch:
    """The events of one feed, turned into a delta."""

    content: list[str] = field(default_factory=list)
    calls: list[ToolCallDelta] = field(default_factory=list)
    saw_call: bool = False


class MarkupToolParser(ToolParser):
    """A tool parser driven by a ``Grammar`` (subclasses set ``grammar``)."""

    grammar: ClassVar[Grammar]
    keep_special_tokens = True
    grammar_based = True

    def __init__(self, vocab, tools=None) -> None:
        super().__init__(vocab, tools)
        self._reset()

    def _reset(self) -> None:
        self._lexer = Lexer(self.grammar)
        self._state = CONTENT
        self._slots: list[_Slot] = []
        self._index = -1
        self._deferred = ""
        self._content_seen = False

    # -- hooks for families ----------------------------------------------------------------------

    def _call_name(self, slot: _Slot, raw: str) -> str | None:
        """The function name from the name text (None: not a call name); may set ``slot.id``."""
        return raw

    def _first_piece_is_args(self) -> bool:
        """Whether the piece that announces a call also streams as arguments (Kimi)."""
        return False

    def _fallback_args(self, raw: str) -> str:
        """Arguments of a finished call whose raw text the converter cannot read (or that has
        none): a JSON body's ``arguments``/``parameters``, else the body without its name."""
        return _json_name_and_args(raw)[1]

    # -- the machine -----------------------------------------------------------------------------

    def _events(self, text: str, final: bool) -> list[tuple[str, str, int]]:
        """(event, value, call index) for ``text``; events "text", "name", "arg", "start",
        "end"."""
        events: list[tuple[str, str, int]] = []
        for marker, piece in self._lexer.feed(text, final):
            move = None if marker is None else self.grammar.transitions.get((self._state, marker))
            if move is None:
                self._plain(piece, events)
                continue
            self._state = move[0]
            for kind in move[1]:
                if kind == START:
                    self._index += 1
                events.append((kind, piece, self._index))
        if final and self._state != CONTENT:
            if self._index >= 0 and self._state in (NAME, ARGS, PREAMBLE, BETWEEN):
                events.append((END, "", self._index))
            self._state = CONTENT
        return events

    def _plain(self, piece: str, events: list[tuple[str, str, int]]) -> None:
        kind = {CONTENT: "text", NAME: "name", ARGS: ARG}.get(self._state)
        if kind is not None:
            events.append((kind, piece, self._index))

    def _delta(self, events: list[tuple[str, str, int]], finished: bool) -> DeltaParts | None:
        batch = _Batch()
        carried = self._deferred
        for kind, value, index in events:
            if kind == "text":
                if batch.saw_call:
                    self._deferred += value
                else:
                    batch.content.append(value)
                continue
            batch.saw_call = True
            if index < 0:
                continue
            while len(self._slots) <= index:
                self._slots.append(_Slot())
            slot = self._slots[index]
            if kind == "name":
                slot.name += value
            elif kind == ARG:
                self._arg_piece(index, slot, value, batch.calls)
            elif kind == END:
                self._end_call(index, slot, batch.calls)
        calls = _merged(batch.calls)
        if self._deferred and (not batch.saw_call or not calls):
            now = self._deferred[len(carried):]
            batch.content = ([carried] if carried else []) + batch.content + ([now] if now else [])
            self._deferred = ""
        content = "".join(batch.content)
        if not self._content_seen and content:
            if content.strip():
                self._content_seen = True
            elif self._slots:
                content = ""
            elif not finished:
                self._deferred, content = content, ""
        if not content and not calls:
            return None
        return DeltaParts(content=content or None, tool_calls=calls)

    def _announce(self, index: int, slot: _Slot, raw: str | None,
                  calls: list[ToolCallDelta], arguments: str | None = None) -> bool:
        name = None if raw is None else self._call_name(slot, raw)
        if not name or not self._known(name):
            return False
        slot.name, slot.announced = name, True
        slot.string_keys = streamable_string_keys(self._properties(name))
        slot.id = slot.id or slot.own_id or new_call_id()
        self._open_call(index)
        calls.append(ToolCallDelta(index=index, id=slot.id, name=name, arguments=arguments))
        return True

    def _arg_piece(self, index: int, slot: _Slot, value: str, calls: list[ToolCallDelta]) -> None:
        slot.args += value
        if not slot.announced:
            raw = slot.name or (_json_name(slot.args) if value else None)
            if self._announce(index, slot, raw, calls) and value and self._first_piece_is_args():
                calls.append(ToolCallDelta(index=index, arguments=value))
            return
        if value:
            piece = self._args_piece(slot, value)
            if piece:
                calls.append(ToolCallDelta(index=index, arguments=piece))

    def _args_piece(self, slot: _Slot, value: str) -> str | None:
        convert = self.grammar.converter
        if convert is None:
            return value
        try:
            now = self._typed(convert(slot.args, True), slot.name)
        except (ValueError, TypeError):
            return None
        safe = stable_prefix(now, slot.string_keys)
        if not safe or safe == slot.streamed or not safe.startswith(slot.streamed):
            return None
        piece, slot.streamed = safe[len(slot.streamed):], safe
        return piece

    def _end_call(self, index: int, slot: _Slot, calls: list[ToolCallDelta]) -> None:
        rest = None
        if self.grammar.converter is not None:
            try:
                final = self._typed(self.grammar.converter(slot.args, False), slot.name)
            except (ValueError, TypeError):
                final = ""
            if len(final) > len(slot.streamed) and final.startswith(slot.streamed):
                rest, slot.streamed = final[len(slot.streamed):], final
        if not slot.announced:
            raw = slot.name or _json_name(slot.args) or ""
            if self._announce(index, slot, raw, calls, arguments=rest or ""):
                return
        if rest and slot.announced:
            calls.append(ToolCallDelta(index=index, arguments=rest))

    # -- schema ----------------------------------------------------------------------------------

    def _properties(self, name: str) -> dict[str, Any]:
        for tool in self.tools:
            function = tool.get("function") or {}
            if function.get("name") == name:
                return (function.get("parameters") or {}).get("properties") or {}
        return {}

    def _known(self, name: str) -> bool:
        if not self.grammar.validate_names or not self.tools:
            return True
        return any((t.get("function") or {}).get("name") == name for t in self.tools)

    def _typed(self, args_json: str, name: str) -> str:
        properties = self._properties(name) if name else {}
        return coerce_arguments(args_json, properties) if properties else args_json

    # -- ToolParser ------------------------------------------------------------------------------

    def _stream(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        return self._delta(self._events(delta_text, False), False)

    def finish(self) -> str:
        return ""

    def flush(self) -> DeltaParts | None:
        events = self._events("", True)
        if not events and not self._deferred:
            return None
        return self._delta(events, True)

    def extract(self, text: str) -> ExtractedToolCalls:
        self._reset()
        delta = self._delta(self._events(text, True), True)
        calls = []
        for slot in self._slots:
            if not slot.name and not slot.args:
                continue
            call = self._finished_call(slot)
            if call is not None:
                calls.append(call)
        self._reset()
        content = delta.content if delta is not None else None
        if content and calls:
            content = content.strip() if self.grammar.strip_content else (
                content if content.strip() else "")
        return ExtractedToolCalls(calls, content or None)

    def _finished_call(self, slot: _Slot) -> ToolCall | None:
        name = slot.name if slot.announced else (
            self._call_name(slot, slot.name.strip()) or "" if slot.name.strip() else "")
        raw = slot.args
        if not name and raw.strip():
            name, args = _json_name_and_args(raw)
        elif raw.strip():
            args = None
            if self.grammar.converter is not None:
                try:
                    args = self.grammar.converter(raw, False)
                except (ValueError, TypeError):
                    args = None
            if args is None:
                args = self._fallback_args(raw)
        else:
            args = "{}"
        if not name or not self._known(name):
            return None
        return ToolCall(name, self._typed(args, name), id=slot.own_id)


def _json_name(args: str) -> str | None:
    """The ``"name"`` of a JSON-ish call body, once its string is complete."""
    at = args.find('"name"')
    if at == -1:
        return None
    rest = args[at + 6:].lstrip()
    if not rest.startswith(":"):
        return None
    rest = rest[1:].lstrip()
    if not rest.startswith('"'):
        return None
    end = rest.find('"', 1)
    return rest[1:end] or None if end != -1 else None


def _json_name_and_args(raw: str) -> tuple[str, str]:
    raw = raw.strip()
    try:
        parsed = json.loads(raw)
    except ValueError:
        return "", raw
    if not isinstance(parsed, dict):
        return "", raw
    name = parsed.get("name", "")
    for key in ("arguments", "parameters"):
        if key in parsed:
            value = parsed[key]
            return name, value if isinstance(value, str) else json.dumps(value,
                                                                         ensure_ascii=False)
    return name, json.dumps({k: v for k, v in parsed.items() if k != "name"}, ensure_ascii=False)


def _merged(calls: list[ToolCallDelta]) -> list[ToolCallDelta]:
    """One delta per call index (pieces of one feed joined, as vLLM coalesces them)."""
    if len(calls) < 2:
        return calls
    merged: dict[int, ToolCallDelta] = {}
    for call in calls:
        have = merged.get(call.index)
        if have is None:
            merged[call.index] = call
            continue
        have.id = have.id or call.id
        have.name = have.name if have.name is not None else call.name
        if call.arguments is not None:
            have.arguments = (have.arguments or "") + call.arguments
    return list(merged.values())
