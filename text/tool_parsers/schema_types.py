"""Typing a call's argument values by the tool's JSON schema (XML-ish formats carry every value
as text; vLLM 0.32 gives them the schema's type).

Observable behaviour, restated: a value that is a string becomes the first of null, integer,
number, boolean, object, array the schema allows and the text reads as (``"1"``/``"0"`` count as
booleans; a number with no fraction becomes an integer; non-finite numbers stay text), else it
stays a string; with no usable type it is read as JSON when it is JSON. Nested objects and array
items follow their own ``properties``/``items``. Type names have the usual aliases (``int``,
``float``, ``bool``, ``dict``, ``list``, …). The arguments are re-serialized only when a value
changed.

Runs on: the response-rendering thread (plain functions).
"""
from __future__ import annotations

import json
import math
from typing import Any

_ALIASES = {
    "str": "string", "text": "string", "varchar": "string", "char": "string", "enum": "string",
    "int": "integer", "int32": "integer", "int64": "integer", "uint": "integer",
    "uint32": "integer", "uint64": "integer", "long": "integer", "short": "integer",
    "unsigned": "integer", "float": "number", "float32": "number", "float64": "number",
    "double": "number", "bool": "boolean", "dict": "object", "arr": "array", "list": "array",
    "sequence": "array",
}
_ORDER = ("null", "integer", "number", "boolean", "object", "array", "string")
_ENUM_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"))


def schema_types(schema: Any) -> set[str]:
    """The JSON types a schema allows (``type``, ``enum`` values, ``anyOf``/``oneOf``/``allOf``);
    {"string"} when it says nothing."""
    if not isinstance(schema, dict):
        return {"string"}
    types: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(t for t in declared if isinstance(t, str))
    enum = schema.get("enum")
    for value in enum if isinstance(enum, list) else ():
        types.add("null" if value is None else
                  next((name for cls, name in _ENUM_TYPES if isinstance(value, cls)), "string"))
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            for choice in schema[key]:
                types |= schema_types(choice)
    return types or {"string"}


def streamable_string_keys(properties: dict[str, Any]) -> set[str] | None:
    """Keys whose unfinished string value may stream (None: no schema, every key may)."""
    if not properties:
        return None
    return {key for key, schema in properties.items() if schema_types(schema) == {"string"}}


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def coerce_text(value: str, types: set[str]) -> Any:
    """``value`` as the first allowed type it reads as (the text itself when none)."""
    allowed = {_ALIASES.get(t.strip().lower(), t.strip().lower()) for t in types}
    for kind in _ORDER:
        if kind not in allowed:
            continue
        if kind == "string":
            return value
        if kind == "null" and value.lower() == "null":
            return None
        if kind == "integer":
            try:
                return int(value)
            except ValueError:
                continue
        if kind == "number":
            try:
                number = float(value)
            except ValueError:
                continue
            if math.isfinite(number):
                return int(number) if number == int(number) else number
        if kind == "boolean" and value.lower().strip() in ("true", "1", "false", "0"):
            return value.lower().strip() in ("true", "1")
        if kind in ("object", "array"):
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if _finite(parsed):
                return parsed
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if _finite(parsed) else value


def _coerce(value: Any, schema: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        typed = coerce_text(value, schema_types(schema))
        return typed, typed is not value
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema, dict) else None
        return value, isinstance(props, dict) and _coerce_members(value, props)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema, dict) else None
        changed = False
        if isinstance(items, dict):
            for i, item in enumerate(value):
                value[i], item_changed = _coerce(item, items)
                changed = changed or item_changed
        return value, changed
    typed = coerce_text(json.dumps(value, ensure_ascii=False), schema_types(schema))
    return typed, type(typed) is not type(value) or typed != value


def _coerce_members(args: dict, properties: dict) -> bool:
    changed = False
    for key, value in args.items():
        if isinstance(properties.get(key), dict):
            args[key], member_changed = _coerce(value, properties[key])
            changed = changed or member_changed
    return changed


def coerce_arguments(args_json: str, properties: dict[str, Any]) -> str:
    """``args_json`` with its values typed by ``properties`` (unchanged when nothing changes or
    it is not a JSON object)."""
    try:
        args = json.loads(args_json)
    except ValueError:
        return args_json
    if not isinstance(args, dict) or not _coerce_members(args, properties):
        return args_json
    return json.dumps(args, ensure_ascii=False)
