"""Request-field coercion with pydantic's lax rules and vLLM's "Bad Request" error text.

vLLM validates request bodies with pydantic 2 models; a type error becomes a 400 whose message is
``"<N> validation error[s]:\\n  <err>..."``, each ``<err>`` being the ``str()`` of a cleaned
pydantic error dict (docs/text-parity.md §8.1). We do not depend on pydantic at run time: this module
restates the few lax-mode rules request fields need (``"5"`` -> 5, ``"yes"`` -> True, ``1.0`` -> 1,
...) as small validator combinators, and formats their errors the same way.

A validator is a callable ``(value, loc, errors) -> value | INVALID``; it appends error dicts to
``errors`` instead of raising, so one body reports all of its errors like pydantic does.
``parse_fields`` runs an ordered field table (see each endpoint's ``types.py``) over a body.

Called by: every endpoint's ``convert`` module, before any semantic check.
Runs on: request pool threads (pure functions).
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, TypeVar

from base.errors import RequestValidationError

INVALID = object()
"""Returned by a validator that appended at least one error."""

MISSING = object()
"""Default marker for a required field."""

Validator = Callable[[Any, tuple, list], Any]

SCHEMA_ATTR = "json_schema"
"""Each validator carries the JSON Schema of the JSON values it accepts as this attribute (the
strict JSON types, as vLLM's pydantic models publish them; the lax string forms are not listed).
``resources.openapi`` builds /openapi.json from them."""


def with_schema(check: Validator, schema: dict) -> Validator:
    """``check`` with its JSON Schema attached (see ``SCHEMA_ATTR``)."""
    setattr(check, SCHEMA_ATTR, schema)
    return check


def schema_of(validator: Validator) -> dict:
    """The JSON Schema a validator declares; ``{}`` (any value) when it declares none."""
    return getattr(validator, SCHEMA_ATTR, {})


def described(check: Validator, kind: str, **params: Any) -> Validator:
    """Attach what ``check`` accepts as ``check.spec = (kind, params)``: plain data that tools
    (the property-based tests) read to generate inputs from the same tables; never used to
    validate."""
    check.spec = (kind, params)  # type: ignore[attr-defined]
    return check

# pydantic accepts "5", " 5 ", "+5", "1_000" and "5.0"/"5.00" as integers, nothing else.
_INT_TEXT = re.compile(r"[+-]?\d+(?:_\d+)*(?:\.0+)?", re.ASCII)
_TRUE_WORDS = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE_WORDS = frozenset({"0", "off", "f", "false", "n", "no"})
MAX_SHOWN_ERRORS = 10  # vLLM lists at most 10 errors, then "...and K more errors"


def summarize_input(value: Any) -> str:
    """vLLM's summary of an offending input: containers by size, long strings cut, else str()."""
    if isinstance(value, dict):
        return f"<dict of {len(value)} items>"
    if isinstance(value, list):
        return f"<list of {len(value)} items>"
    if isinstance(value, str):
        return value if len(value) <= 200 else value[:200] + "...[truncated]"
    return str(value)


def add_error(errors: list, kind: str, loc: tuple, msg: str, value: Any,
              ctx: dict | None = None) -> object:
    """Record one pydantic-style error; returns INVALID so validators can `return add_error(...)`."""
    err: dict[str, Any] = {"type": kind, "loc": ".".join(str(p) for p in loc), "msg": msg,
                           "input": summarize_input(value)}
    if ctx is not None:
        err["ctx"] = ctx
    errors.append(err)
    return INVALID


def validation_error(errors: list[dict]) -> RequestValidationError:
    """The 400 "Bad Request" for a list of error dicts, worded and truncated as vLLM does."""
    count = len(errors)
    head = f"{count} validation error{'s' if count != 1 else ''}:"
    lines = [head] + [str(e)[:1000] for e in errors[:MAX_SHOWN_ERRORS]]
    message = "\n  ".join(lines)
    if count > MAX_SHOWN_ERRORS:
        message += f"\n  ...and {count - MAX_SHOWN_ERRORS} more errors"
    exc = RequestValidationError(message)
    # NOTE: set after construction: ApiError would otherwise append "(parameter=...)".
    exc.param = errors[0]["loc"] if errors else None
    return exc


# ---- scalar validators ----------------------------------------------------------------------

def _bounds(value: Any, loc: tuple, errors: list, ge: Any, le: Any, gt: Any = None) -> Any:
    if ge is not None and not value >= ge:
        return add_error(errors, "greater_than_equal", loc,
                         f"Input should be greater than or equal to {ge}", value, {"ge": ge})
    if gt is not None and not value > gt:
        return add_error(errors, "greater_than", loc,
                         f"Input should be greater than {gt}", value, {"gt": gt})
    if le is not None and not value <= le:
        return add_error(errors, "less_than_equal", loc,
                         f"Input should be less than or equal to {le}", value, {"le": le})
    return value


def v_int(ge: int | None = None, le: int | None = None, gt: int | None = None) -> Validator:
    def check(value: Any, loc: tuple, errors: list) -> Any:
        if type(value) is int:
            out = value
        elif isinstance(value, bool):
            out = int(value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                return add_error(errors, "finite_number", loc, "Input should be a finite number",
                                 value)
            if value != int(value):
                return add_error(errors, "int_from_float", loc, "Input should be a valid integer, "
                                 "got a number with a fractional part", value)
            out = int(value)
        elif isinstance(value, str):
            text = value.strip()
            if not _INT_TEXT.fullmatch(text):
                return add_error(errors, "int_parsing", loc, "Input should be a valid integer, "
                                 "unable to parse string as an integer", value)
            out = int(text.split(".")[0])
        else:
            return add_error(errors, "int_type", loc, "Input should be a valid integer", value)
        return _bounds(out, loc, errors, ge, le, gt)
    return with_schema(described(check, "int", ge=ge, le=le, gt=gt), _bounded({"type": "integer"}, ge, le, gt))


def _bounded(schema: dict, ge: Any, le: Any, gt: Any = None) -> dict:
    for key, bound in (("minimum", ge), ("maximum", le), ("exclusiveMinimum", gt)):
        if bound is not None:
            schema[key] = bound
    return schema


def v_float(ge: float | None = None, le: float | None = None) -> Validator:
    def check(value: Any, loc: tuple, errors: list) -> Any:
        if isinstance(value, (int, float)):  # bool included: pydantic lax takes True as 1.0
            out = float(value)
        elif isinstance(value, str):
            try:
                if not value.isascii():
                    raise ValueError(value)
                out = float(value.strip())
            except ValueError:
                return add_error(errors, "float_parsing", loc, "Input should be a valid number, "
                                 "unable to parse string as a number", value)
        else:
            return add_error(errors, "float_type", loc, "Input should be a valid number", value)
        return _bounds(out, loc, errors, ge, le)
    return with_schema(described(check, "float", ge=ge, le=le), _bounded({"type": "number"}, ge, le))


def v_bool() -> Validator:
    def check(value: Any, loc: tuple, errors: list) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str):
            word = value.lower()
            if word in _TRUE_WORDS:
                return True
            if word in _FALSE_WORDS:
                return False
            parsable = True
        elif type(value) is int:
            parsable = abs(value) < 2 ** 63  # pydantic-core reads ints as i64 first
        elif type(value) is float:
            parsable = math.isfinite(value) and value.is_integer()
        else:
            parsable = False
        if parsable:
            return add_error(errors, "bool_parsing", loc,
                             "Input should be a valid boolean, unable to interpret input", value)
        return add_error(errors, "bool_type", loc, "Input should be a valid boolean", value)
    return with_schema(described(check, "bool"), {"type": "boolean"})


def v_str(min_length: int | None = None, max_length: int | None = None) -> Validator:
    def check(value: Any, loc: tuple, errors: list) -> Any:
        if not isinstance(value, str):
            return add_error(errors, "string_type", loc, "Input should be a valid string", value)
        if min_length is not None and len(value) < min_length:
            return add_error(errors, "string_too_short", loc, f"String should have at least "
                             f"{min_length} character{'s' if min_length != 1 else ''}", value,
                             {"min_length": min_length})
        if max_length is not None and len(value) > max_length:
            return add_error(errors, "string_too_long", loc, f"String should have at most "
                             f"{max_length} characters", value, {"max_length": max_length})
        return value
    schema: dict = {"type": "string"}
    if min_length is not None:
        schema["minLength"] = min_length
    if max_length is not None:
        schema["maxLength"] = max_length
    return with_schema(described(check, "str", min_length=min_length, max_length=max_length), schema)


def v_literal(*choices: str) -> Validator:
    shown = " or ".join(repr(c) for c in choices) if len(choices) <= 2 else (
        ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}")

    def check(value: Any, loc: tuple, errors: list) -> Any:
        if isinstance(value, str) and value in choices:
            return value
        return add_error(errors, "literal_error", loc, f"Input should be {shown}", value,
                         {"expected": shown})
    return with_schema(described(check, "literal", choices=choices), {"type": "string", "enum": list(choices)})


def v_any() -> Validator:
    return described(with_schema(lambda value, loc, errors: value, {}), "any")


# ---- containers -----------------------------------------------------------------------------

def v_list(item: Validator, max_length: int | None = None,
           min_length: int | None = None) -> Validator:
    def check(value: Any, loc: tuple, errors: list) -> Any:
        if not isinstance(value, list):
            return add_error(errors, "list_type", loc, "Input should be a valid list", value)
        before = len(errors)
        out = [item(v, loc + (i,), errors) for i, v in enumerate(value)]
        if len(errors) != before:
            return INVALID
        if max_length is not None and len(out) > max_length:
            return add_error(errors, "too_long", loc, f"List should have at most {max_length} "
                             f"item{'s' if max_length != 1 else ''} after validation, not "
                             f"{len(out)}", value, {"field_type": "List",
                                                    "max_length": max_length,
                                                    "actual_length": len(out)})
        if min_length is not None and len(out) < min_length:
            return add_error(errors, "too_short", loc, f"List should have at least {min_length} "
                             f"item{'s' if min_length != 1 else ''} after validation, not "
                             f"{len(out)}", value, {"field_type": "List",
                                                    "min_length": min_length,
                                                    "actual_length": len(out)})
        return out
    schema = {"type": "array", "items": schema_of(item)}
    if max_length is not None:
        schema["maxItems"] = max_length
    if min_length is not None:
        schema["minItems"] = min_length
    return with_schema(described(check, "list", item=item, min_length=min_length,
                     max_length=max_length), schema)


#: What a fast path (``with_fast_path``) returns for a value it leaves to the full validator.
SLOW = object()


def with_fast_path(slow: Validator, fast: Callable[[Any], Any]) -> Validator:
    """``slow`` with a fast path for its common inputs: ``fast(value)`` returns what ``slow``
    would return for the values it recognises (never an error), and ``SLOW`` for the rest,
    which ``slow`` then validates and reports. Same ``spec`` and schema as ``slow``.

    PERF: a union tries its members in order, so a value accepted by a later member first
    built and dropped the earlier members' errors; a list checked item by item costs a call
    per item."""
    def check(value: Any, loc: tuple, errors: list) -> Any:
        out = fast(value)
        return slow(value, loc, errors) if out is SLOW else out
    return with_schema(described(check, slow.spec[0], **slow.spec[1]), schema_of(slow))


def v_int_list(ge: int | None = None) -> Validator:
    """A list of ints with a fast path for the common all-int case (long token prompts)."""
    def fast(value: Any) -> Any:
        if isinstance(value, list) and all(type(v) is int for v in value):
            if ge is None or not value or min(value) >= ge:
                return value
        return SLOW
    return with_fast_path(v_list(v_int(ge=ge)), fast)


def v_dict(item: Validator = v_any()) -> Validator:
    def check(value: Any, loc: tuple, errors: list) -> Any:
        if not isinstance(value, dict):
            return add_error(errors, "dict_type", loc, "Input should be a valid dictionary", value)
        before = len(errors)
        out = {k: item(v, loc + (k,), errors) for k, v in value.items()}
        return INVALID if len(errors) != before else out
    inner = schema_of(item)
    return with_schema(described(check, "dict", item=item), {"type": "object", **({"additionalProperties": inner}
                                                    if inner else {})})


def v_nullable(inner: Validator) -> Validator:
    def check(value: Any, loc: tuple, errors: list) -> Any:
        return None if value is None else inner(value, loc, errors)
    schema = schema_of(inner)
    return with_schema(described(check, "nullable", inner=inner), {"anyOf": [schema, {"type": "null"}]} if schema else {})


def v_union(*alternatives: Validator) -> Validator:
    """pydantic's union: the first alternative that validates wins; otherwise all their errors.

    NOTE: pydantic's smart mode prefers an exact-type match over an earlier lax one; callers order
    the alternatives so that the first success is also the exact match for JSON inputs.
    """
    def check(value: Any, loc: tuple, errors: list) -> Any:
        collected: list = []
        for alt in alternatives:
            mine: list = []
            out = alt(value, loc, mine)
            if out is not INVALID:
                return out
            collected.extend(mine)
        errors.extend(collected)
        return INVALID
    schemas = [schema_of(alt) for alt in alternatives]
    return with_schema(described(check, "union", alternatives=alternatives), {"anyOf": schemas} if all(schemas) else {})


# ---- field tables ---------------------------------------------------------------------------

Field = tuple  # (name, validator, default); default MISSING = required


def fields_schema(fields: list[Field], title: str | None = None) -> dict:
    """The JSON Schema of a request object validated by ``fields``: its properties in table
    order with their defaults, the fields without one required; other keys are ignored (so
    allowed), as ``collect_fields`` ignores them."""
    properties: dict[str, dict] = {}
    required = []
    for name, validator, default in fields:
        prop = dict(schema_of(validator))
        if default is MISSING:
            required.append(name)
        else:
            value = default() if callable(default) else default
            if value is None or isinstance(value, (bool, int, float, str, list, dict)):
                prop["default"] = value
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if title:
        schema["title"] = title
    if required:
        schema["required"] = required
    return schema


def collect_fields(body: dict, fields: list[Field]) -> tuple[dict[str, Any], list[dict]]:
    """Validate ``body`` against an ordered field table; (values, errors), never raising.
    Unknown keys are ignored."""
    errors: list = []
    out: dict[str, Any] = {}
    for name, validator, default in fields:
        if name in body:
            out[name] = validator(body[name], ("body", name), errors)
        elif default is MISSING:
            add_error(errors, "missing", ("body", name), "Field required", body)
        else:
            out[name] = default() if callable(default) else default
    return out, errors


def parse_fields(body: dict, fields: list[Field]) -> dict[str, Any]:
    """``collect_fields`` that raises.

    Raises:
        RequestValidationError: one or more fields failed (all of them reported, in table order).
    """
    out, errors = collect_fields(body, fields)
    if errors:
        raise validation_error(errors)
    return out


S = TypeVar("S")


def parse_struct(body: dict, fields: list[Field], struct: type[S]) -> S:
    """``parse_fields`` into an endpoint's typed request struct (``types.py``), whose fields are
    the table's (``struct_matches`` checks that; the table's order is the errors' order).

    Raises:
        RequestValidationError: as ``parse_fields``.
    """
    return struct(**parse_fields(body, fields))


def struct_matches(fields: list[Field], struct: type) -> bool:
    """The struct declares exactly the table's fields (a struct extending a shared one, such as
    ``SamplingRequest``, lists the inherited fields first)."""
    names = [name for name, _, _ in fields]
    return len(names) == len(set(names)) and set(names) == set(struct.__struct_fields__)


def require_object(body: Any) -> dict:
    """The "body not an object" 400 (docs/text-parity.md §8.2) for any non-dict JSON body."""
    if not isinstance(body, dict):
        errors: list = []
        add_error(errors, "model_attributes_type", ("body",), "Input should be a valid dictionary "
                  "or object to extract fields from", body)
        raise validation_error(errors)
    return body
