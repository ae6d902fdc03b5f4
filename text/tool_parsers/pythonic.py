"""``pythonic`` / ``llama4_pythonic``: calls written as a Python list, ``[f(a=1), g(b='x')]``
(Llama 3.2/4; Llama 4 may wrap it in ``<|python_start|>…<|python_end|>``).

Observable behaviour of vLLM 0.32's parsers, restated:
- whole output: it must start with ``[`` and a function name, hold only calls with keyword
  arguments whose values are literals (``true``/``false``/``null`` too; tuples and sets become
  lists; negative numbers; plain f-strings), and parse as Python; then every call is a tool call
  (arguments ``json.dumps`` of the keywords) and the content is None. Anything else is content.
- streaming: an output not starting with ``[`` (after ``<|python_start|>``) is content. Otherwise
  the text so far is closed (open quotes and brackets) when that gives valid Python, and each
  call's arguments stream as its JSON arguments minus what the closing added; a call's first
  delta carries id, name and the arguments so far.

Runs on: the response-rendering thread.
"""
from __future__ import annotations

import ast
import json
import re
from typing import Any, Sequence

from text.parsed import DeltaParts, ExtractedToolCalls, ToolCall, ToolCallDelta
from text.tool_parsers.base import ToolParser
from text.tool_parsers.ids import new_call_id
from text.tool_parsers.registry import register_tool_parser

START, END = "<|python_start|>", "<|python_end|>"
_IDENT = re.compile(r"[a-zA-Z]\w*\Z")
_LITERAL_NAMES = {"null": None, "true": True, "false": False}
_CLOSER = {"[": "]", "(": ")", "{": "}", "'": "'", '"': '"'}


class NotACall(ValueError):
    """The text is not a list of calls with literal keyword arguments."""


def literal(node: ast.expr) -> Any:
    """The JSON value of an argument expression."""
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, (str, int, float)):
            return node.value
        raise NotACall("not a JSON value")
    if isinstance(node, ast.Dict):
        if not all(isinstance(k, ast.Constant) for k in node.keys):
            raise NotACall("dict keys must be literals")
        return {k.value: literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [literal(v) for v in node.elts]
    if isinstance(node, ast.JoinedStr) and all(isinstance(p, ast.Constant) for p in node.values):
        return "".join(str(p.value) for p in node.values)
    if isinstance(node, ast.Name) and node.id in _LITERAL_NAMES:
        return _LITERAL_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise NotACall("arguments must be literals")


def dotted_name(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise NotACall("invalid function name")
    parts.append(node.id)
    return ".".join(reversed(parts))


def read_calls(source: str) -> list[ToolCall]:
    """The calls of a Python list-of-calls expression.

    Raises:
        NotACall: it is not one (SyntaxError is raised as it is).
    """
    body = ast.parse(source).body
    value = getattr(body[0], "value", None) if body else None
    if not isinstance(value, ast.List) or not all(isinstance(e, ast.Call) for e in value.elts):
        raise NotACall("not a list of calls")
    return [ToolCall(dotted_name(call.func),
                     json.dumps({k.arg: literal(k.value) for k in call.keywords},
                                ensure_ascii=False))
            for call in value.elts]


def strict_shape(source: str) -> bool:
    """vLLM's shape check before parsing: ``[name(`` then keyword arguments only, simple names
    (written here as a scan, not a backtracking regex, so no input can stall the hub)."""
    if not re.match(r"\[[a-zA-Z]\w*\(", source):
        return False
    try:
        value = ast.parse(source).body[0].value
    except (SyntaxError, IndexError, AttributeError, ValueError):
        return True  # the parse below fails the same way
    if not isinstance(value, ast.List):
        return True
    for call in value.elts:
        if not isinstance(call, ast.Call):
            return True
        if not isinstance(call.func, ast.Name) or not _IDENT.match(call.func.id):
            return False
        if call.args or any(k.arg is None or not _IDENT.match(k.arg) for k in call.keywords):
            return False
    return True


def close_partial(text: str) -> tuple[str, str] | None:
    """(text closed into valid Python, what was added), or None while it cannot be closed
    meaningfully (inside a parameter name or dict key).

    Raises:
        NotACall: brackets that do not match.
    """
    stack: list[str] = []
    for i, ch in enumerate(text):
        if stack and stack[-1] in "'\"":
            if ch == stack[-1] and not _escaped(text, i):
                stack.pop()
            continue
        if ch in "[({":
            stack.append(ch)
        elif ch in "])}":
            if not stack or _CLOSER[stack.pop()] != ch:
                raise NotACall("mismatched brackets")
        elif ch in "'\"":
            stack.append(ch)
    text = text.rstrip()
    if text.endswith(("=", ":")):
        return None
    if stack and stack[-1] == "{":
        head = text[:text.rfind("{")]
        if head.count(":") <= head.count(","):
            return None
    if stack and stack[-1] == "(":
        head = text[:text.rfind("(")]
        if head.count("=") <= head.count(","):
            return None
    if text.endswith(","):
        text = text[:-1]
    if stack and stack[-1] == "[" and not text.endswith(("[", ")")):
        return None
    added = "".join(_CLOSER[ch] for ch in reversed(stack))
    candidate = text + added
    try:
        module = ast.parse(candidate)
    except SyntaxError:
        return None
    if not module.body:
        return None
    if "}" in added and any(isinstance(n, ast.Set) for n in ast.walk(module)):
        return None  # a truncated dict closed into a set
    return candidate, added


def _escaped(text: str, index: int) -> bool:
    slashes = 0
    while index - 1 - slashes >= 0 and text[index - 1 - slashes] == "\\":
        slashes += 1
    return slashes % 2 == 1


@register_tool_parser("pythonic")
class PythonicToolParser(ToolParser):

    def __init__(self, vocab, tools=None) -> None:
        super().__init__(vocab, tools)
        self._index = -1

    def _unwrap(self, text: str) -> str:
        return text

    def extract(self, text: str) -> ExtractedToolCalls:
        source = self._unwrap(text)
        if not strict_shape(source):
            return ExtractedToolCalls([], text)
        try:
            return ExtractedToolCalls(read_calls(source), None)
        except (SyntaxError, ValueError, NotACall, IndexError):
            return ExtractedToolCalls([], text)

    def _starts_calls(self, text: str) -> bool:
        return text.startswith("[")

    def _stream(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        if not self._starts_calls(self.text):
            return DeltaParts(content=delta_text)
        try:
            return self._stream_calls(self._stream_source(self.text))
        except Exception:  # noqa: BLE001 - vLLM skips a chunk it cannot read
            return None

    def _stream_source(self, text: str) -> str:
        return text

    def _stream_calls(self, source: str) -> DeltaParts | None:
        closed = close_partial(source)
        if closed is None:
            return None
        valid, added = closed
        calls = read_calls(valid)
        pieces: list[ToolCallDelta] = []
        for index, call in enumerate(calls):
            if index < self._index:
                continue
            self._index = index
            self._open_call(index)
            complete = index < len(calls) - 1 or ")]" not in added
            if complete:
                self._index += 1
            withheld = "" if complete else added[:-2]
            if not complete and added[-2] == ")":
                withheld += "}"
            withheld = withheld.replace("'", '"')
            args = call.arguments
            if withheld:
                if not args.endswith(withheld):
                    raise ValueError("arguments do not end with the withheld closing")
                args = args[:-len(withheld)]
            sent = self.streamed_args[index]
            if not sent:
                pieces.append(ToolCallDelta(index, id=new_call_id(), name=call.name,
                                            arguments=args))
            elif args[len(sent):]:
                pieces.append(ToolCallDelta(index, arguments=args[len(sent):]))
            else:
                continue
            self.streamed_args[index] += pieces[-1].arguments
        if pieces:
            return DeltaParts(tool_calls=pieces)
        if not added and self._index > 0:
            return DeltaParts(content="")
        return None

    def finish(self) -> str:
        return ""


@register_tool_parser("llama4_pythonic")
class Llama4PythonicToolParser(PythonicToolParser):

    def _unwrap(self, text: str) -> str:
        if text.startswith(START):
            text = text[len(START):].replace(END, "")
        return text

    def _starts_calls(self, text: str) -> bool:
        return text.startswith("[") or text.startswith(START)

    def _stream_source(self, text: str) -> str:
        if text.startswith(START):
            text = text[len(START):]
        if text.endswith(END):
            text = text[:text.rfind(END)]
        return text
