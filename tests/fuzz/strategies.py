"""Hypothesis strategies for request bodies, derived from greenfront's own field tables.

Every validator of ``resources.common.fields`` (and the few endpoint-specific ones) carries a
``spec = (kind, params)``; ``value_for`` turns a spec into a strategy for values of the field's
type (boundaries and lax spellings such as ``"5"``, ``5.0``, ``"yes"`` included), so that
requests get past parsing into conversion, the engine and rendering. ``body_for`` draws a whole
body from a field table. ``with_faults`` then damages half of the bodies at one random place, at
any nesting level: a value replaced by junk (wrong types, nulls, huge and non-finite numbers,
unicode, deep nesting), a key dropped, an unknown key added.
"""
from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import strategies as st

from resources.common.fields import MISSING

MODEL = "tiny"
HUGE_INTS = [2 ** 31, 2 ** 32, 2 ** 53 + 1, 2 ** 63 - 1, 2 ** 63, -(2 ** 63), -(2 ** 63) - 1,
             2 ** 64, 10 ** 30]
ODD_FLOATS = [0.0, -0.0, 1e-300, 5e-324, 1e308, -1e308, 1.5, -1.5, 2.0000001,
              math.nan, math.inf, -math.inf]
ODD_TEXT = ["", " ", "\x00", "😀" * 3, "[INST]", "<s>", "</s>", "\u202e", "a" * 300,
            "null", "true", "5", "-1", "1e999", "NaN", "{}", "[]"]

#: Keys a ``vllm_xargs``/``extra_args`` object may not carry in these tests: the simulator's
#: per-request test knobs (``sim_error_after`` makes the engine fail on purpose, ``sim_ttft_ms``
#: can hold a request for hours); they are not user input to a real engine.
_SIM_PREFIX = "sim_"

text = st.one_of(st.text(max_size=12), st.sampled_from(ODD_TEXT))


def _scalar_junk() -> st.SearchStrategy:
    return st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.sampled_from(HUGE_INTS),
                     st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(ODD_FLOATS),
                     text, st.just("\ud800"))  # a lone surrogate: not encodable as UTF-8


def _deep(depth: int) -> Any:
    """``[[[…]]]`` or ``{"a":{"a":…}}`` nested ``depth`` levels."""
    return st.sampled_from(["list", "dict"]).map(
        lambda kind: _nest(kind, depth))


def _nest(kind: str, depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


junk = st.one_of(
    _scalar_junk(),
    st.recursive(_scalar_junk(), lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)), max_leaves=6),
    st.integers(20, 200).flatmap(_deep),
)
"""Any JSON-ish value (NaN and infinities included: the body encoder writes them as JSON's
invalid ``NaN``/``Infinity`` tokens)."""


def _int(ge: int | None = None, le: int | None = None, gt: int | None = None) -> st.SearchStrategy:
    low = ge if ge is not None else (gt + 1 if gt is not None else 0)
    small = st.integers(low, low + 8)
    edges = [v for v in (ge, le, gt) if v is not None]
    edges += [v + d for v in edges for d in (-1, 1)] + [-1]
    lax = small.flatmap(lambda v: st.sampled_from([str(v), float(v), f" {v} "]))
    return st.one_of(*[small] * 8, st.sampled_from(edges), lax)


def _float(ge: float | None = None, le: float | None = None) -> st.SearchStrategy:
    low = ge if ge is not None else 0.0
    high = le if le is not None else 1.0
    edges = [v for v in (ge, le) if v is not None] + [-1.5, 2.5, 1e-300, 1e308, -0.0]
    return st.one_of(*[st.floats(min(low, high), max(low, high))] * 6, st.integers(0, 2),
                     st.sampled_from(edges), st.sampled_from(["0.5", "1", "1e-3"]))


def value_for(validator: Any, depth: int = 0) -> st.SearchStrategy:
    """A strategy for values of the type ``validator`` accepts."""
    kind, params = getattr(validator, "spec", ("any", {}))
    return _good(kind, params, depth) if depth < 6 else junk


def _good(kind: str, p: dict, depth: int) -> st.SearchStrategy:
    sub = depth + 1
    if kind == "int":
        return _int(p["ge"], p["le"], p["gt"])
    if kind == "float":
        return _float(p["ge"], p["le"])
    if kind == "bool":
        return st.one_of(st.booleans(), st.booleans(), st.sampled_from([0, 1, "yes", "off"]))
    if kind == "str":
        low, high = p["min_length"] or 0, p["max_length"]
        lengths = [n for n in (low, high) if n is not None]
        sized = st.sampled_from(lengths).map(lambda n: "x" * n) if lengths else text
        return st.one_of(text, text, sized)
    if kind == "literal":
        return st.sampled_from(list(p["choices"]))
    if kind == "list":
        size = st.integers(p["min_length"] or 0, (p["max_length"] or 3) + 1)
        return size.flatmap(lambda n: st.lists(value_for(p["item"], sub), min_size=n,
                                               max_size=n))
    if kind == "dict":
        keys = st.integers(-2, 200).map(str) if p.get("int_keys") else text
        return st.dictionaries(keys.filter(lambda k: not k.startswith(_SIM_PREFIX)),
                               value_for(p["item"], sub), max_size=3)
    if kind == "nullable":
        return st.one_of(st.none(), value_for(p["inner"], sub))
    if kind == "union":
        return st.one_of(*[value_for(alt, sub) for alt in p["alternatives"]])
    if kind == "object":
        return body_for(p["fields"], sub, model=False)
    if kind == "message":
        return message(p["roles"], sub)
    return st.one_of(st.none(), st.none(), junk)  # "any": None is what every such field takes


# ---- chat messages ---------------------------------------------------------------------------

def _part(depth: int) -> st.SearchStrategy:
    kinds = ["text", "input_text", "output_text", "refusal", "thinking", "tool_reference",
             "image_url", "input_audio", "file", "bogus"]
    typed = st.builds(
        lambda kind, payload, extra: {"type": kind, **{k: payload for k in extra}},
        st.sampled_from(kinds), text,
        st.lists(st.sampled_from(["text", "refusal", "thinking", "name", "image_url"]),
                 max_size=2))
    return st.one_of(typed, typed, text)


def _tool_call(depth: int) -> st.SearchStrategy:
    function = st.fixed_dictionaries({}, optional={
        "name": text, "arguments": st.one_of(text, st.just('{"a": 1}'),
                                             st.dictionaries(text, text))})
    return st.fixed_dictionaries({"function": function}, optional={
        "id": text, "type": st.sampled_from(["function", "custom"])})


def message(roles: tuple[str, ...], depth: int) -> st.SearchStrategy:
    """One chat message: a known or custom role, string/part/none content, and the extras the
    template reads (tool calls, names, reasoning)."""
    content = st.one_of(text, text, st.none(), st.lists(_part(depth + 1), max_size=3))
    return st.fixed_dictionaries(
        {"role": st.sampled_from(list(roles) * 3 + ["function", "custom"]), "content": content},
        optional={"tool_calls": st.lists(_tool_call(depth + 1), max_size=2),
                  "tool_call_id": text, "name": text, "reasoning": text})


# ---- whole bodies ----------------------------------------------------------------------------

@st.composite
def _body(draw: Any, fields: list, depth: int, model: bool) -> dict:
    out: dict[str, Any] = {}
    for name, validator, default in fields:
        required = default is MISSING
        # Hypothesis leans towards 0 (its simplest choice): 0 means "required: present,
        # optional: absent", so that its simplest bodies are small valid ones.
        chance = draw(st.integers(0, 19))
        if (chance < 19) if required else (chance >= 17):
            out[name] = draw(value_for(validator, depth))
    if model and draw(st.integers(0, 9)) < 9:  # 0 (the simplest): the served model
        out["model"] = MODEL
    return out


def body_for(fields: list, depth: int = 0, *, model: bool = True,
             base: st.SearchStrategy | None = None) -> st.SearchStrategy:
    """A request body drawn from the field table ``fields`` (``(name, validator, default)``);
    ``base`` draws keys that override the drawn ones (a usable prompt, say) 4 times in 5."""
    body = _body(fields, depth, model)
    if base is None:
        return body
    return st.tuples(body, base, st.integers(0, 4)).map(
        lambda t: {**t[0], **t[1]} if t[2] < 4 else t[0])


# ---- faults ----------------------------------------------------------------------------------

def _places(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every container in ``value`` (the root included)."""
    found = [path] if isinstance(value, (dict, list)) else []
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, child in items:
        found += _places(child, path + (key,))
    return found


@st.composite
def _damaged(draw: Any, clean: st.SearchStrategy) -> Any:
    value = copy.deepcopy(draw(clean))
    path = draw(st.sampled_from(_places(value) or [()]))
    if not path and not isinstance(value, (dict, list)):
        return draw(junk)
    target = value
    for key in path:
        target = target[key]
    keys = list(target.keys() if isinstance(target, dict) else range(len(target)))
    action = draw(st.sampled_from(["replace", "replace", "drop", "add"]) if keys
                  else st.just("add"))
    if action == "add":
        if isinstance(target, dict):
            target[draw(text)] = draw(junk)
        else:
            target.append(draw(junk))
    elif action == "drop":
        del target[draw(st.sampled_from(keys))]
    else:
        target[draw(st.sampled_from(keys))] = draw(junk)
    return value


def with_faults(clean: st.SearchStrategy) -> st.SearchStrategy:
    """``clean`` values, or (as often) the same values damaged at one random place."""
    return st.one_of(clean, _damaged(clean))
