"""``tool_choice`` "required" and a named function: the JSON schema the engine is constrained to,
and reading the generated JSON back as tool calls (whole and streamed).

Observable behaviour of vLLM 0.32, restated:
- named: the output is the function's arguments (schema: the tool's ``parameters``, or an empty
  object schema); it becomes one call of that function, its text the arguments verbatim.
  Streamed, each delta's text is an arguments fragment, the first one also carrying id and name.
- required: the output is a JSON array (``minItems`` 1, ``maxItems`` 1 when
  ``parallel_tool_calls`` is false) of ``{"name", "parameters"}`` objects, one ``anyOf`` branch per
  tool; ``$defs`` of the tools' parameters are lifted to the top. Parsed whole, each element
  becomes a call whose arguments are ``json.dumps(parameters)``; an array that does not validate
  gives no calls. Streamed, an element is announced (id, name and the parameters text so far)
  once its name is complete and its parameters started; later deltas carry the new parameters
  text.

Runs on: request pool threads (schema) and the HTTP hub (parsing the output).
"""
from __future__ import annotations

import copy
import json
from typing import Any

from base.errors import InvalidRequest
from text.parsed import DeltaParts, ToolCall, ToolCallDelta
from text.tool_parsers.ids import new_call_id
from text.tool_parsers.json_scan import scan_object_array

EMPTY_OBJECT = {"type": "object", "properties": {}}


def _parameters(tool: dict) -> Any:
    return tool.get("function", {}).get("parameters")


def json_schema(tools: list[dict], named: str | None, parallel_tool_calls: bool | None) -> dict:
    """The schema of the forced call(s) (vLLM's ``get_json_schema_from_tools``).

    Raises:
        InvalidRequest: two tools define the same ``$defs`` entry differently, or ``$defs`` is
            not an object.
    """
    if named is not None:
        for tool in tools:
            if tool.get("function", {}).get("name") == named:
                return _parameters(tool) or EMPTY_OBJECT
        raise InvalidRequest(f"Tool '{named}' has not been passed in `tools`.", param="tools")
    branches, defs = [], {}
    for tool in tools:
        function = tool.get("function", {})
        params = copy.deepcopy(function.get("parameters"))
        if isinstance(params, dict):
            own = params.pop("$defs", {})
            if not isinstance(own, dict):
                raise InvalidRequest(f"`$defs` in the parameters of tool '{function.get('name')}' "
                                     f"must be an object, got {type(own).__name__}.",
                                     param="tools")
            for key, value in own.items():
                if key in defs and defs[key] != value:
                    raise InvalidRequest(f"Tool definition '{key}' has multiple schemas, which "
                                         "is not supported.", param="tools")
                defs[key] = value
        branches.append({"properties": {"name": {"type": "string", "enum": [function.get("name")]},
                                        "parameters": params or EMPTY_OBJECT},
                         "required": ["name", "parameters"]})
    schema: dict[str, Any] = {"type": "array", "minItems": 1,
                              "items": {"type": "object", "anyOf": branches}}
    if parallel_tool_calls is False:
        schema["maxItems"] = 1
    if defs:
        schema["$defs"] = defs
    return schema


def parse_forced(content: str | None, named: str | None) -> list[ToolCall]:
    """The calls in a finished forced output ([] when there are none or they do not parse)."""
    if named is not None:
        if content is None or not content.strip():
            return []
        return [ToolCall(named, content)]
    try:
        items = json.loads(content or "")
    except ValueError:
        return []
    if not isinstance(items, list) or not all(
            isinstance(i, dict) and isinstance(i.get("name"), str)
            and isinstance(i.get("parameters", None), (dict, type(None))) for i in items):
        return []
    return [ToolCall(i["name"], json.dumps(i.get("parameters"), ensure_ascii=False))
            for i in items]


class _Span:
    """One element of the required array: its name once closed, where its parameters run."""

    __slots__ = ("name", "name_end", "args_start", "args_end")

    def __init__(self) -> None:
        self.name: str | None = None
        self.name_end = 0
        self.args_start: int | None = None
        self.args_end: int | None = None

    def ready_at(self, length: int) -> bool:
        return (self.name is not None and self.name_end <= length
                and self.args_start is not None and self.args_start < length)


def scan_required(text: str) -> list[_Span]:
    """Spans of the (possibly partial) required array; prefix-stable, so a scan of the current
    text also says what a shorter text had revealed."""
    spans = []
    for element in scan_object_array(text)[0]:
        span = _Span()
        name = element.members.get("name")
        if name is not None and (value := element.string(text, "name")) is not None:
            span.name, span.name_end = value, name.end
        params = element.members.get("parameters")
        if params is not None:
            span.args_start, span.args_end = params.start, params.end
        spans.append(span)
    return spans


class ForcedCallStream:
    """Streams the calls of a named or "required" forced output."""

    def __init__(self, named: str | None) -> None:
        self.named = named
        self.text = ""
        self.announced = False

    def feed(self, delta_text: str) -> DeltaParts | None:
        previous, self.text = self.text, self.text + delta_text
        if self.named is not None:
            call = ToolCallDelta(index=0, arguments=delta_text)
            if not self.announced:
                call.id, call.name, self.announced = new_call_id(), self.named, True
            return DeltaParts(tool_calls=[call])
        calls = []
        for index, span in enumerate(scan_required(self.text)):
            if span.name is None or span.args_start is None:
                break
            end = span.args_end if span.args_end is not None else len(self.text)
            if span.ready_at(len(previous)):
                piece = self.text[min(end, len(previous)):end]
                if piece:
                    calls.append(ToolCallDelta(index=index, arguments=piece))
                continue
            calls.append(ToolCallDelta(index=index, id=new_call_id(), name=span.name,
                                       arguments=self.text[span.args_start:end]))
        return DeltaParts(tool_calls=calls) if calls else None

    def finish(self) -> str:
        return ""
