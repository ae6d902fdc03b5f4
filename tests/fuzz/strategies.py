"""Hypothesis strategies for request bodies, derived from greenfront's own field tables.

Every validator of ``resources.common.fields`` (and the few endpoint-specific ones) carries a
``spec = (kind, params)``; ``value_for`` turns a spec into a strategy that mostly draws what the
field accepts (so that requests get past parsing into conversion, the engine and rendering),
with boundary values, lax spellings (``"5"``, ``5.0``, ``"yes"``), and at every nesting level a
share of junk: wrong types, nulls, huge and non-finite numbers, unicode, deep nesting.
``body_for`` draws a whole body from a field table: required fields usually present, optional
ones sometimes, unknown keys now and then.
"""
from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

from resources.common.fields import MISSING

MODEL = "tiny"
HUGE_INTS = [2 ** 31, 2 ** 32, 2 ** 53 + 1, 2 ** 63 - 1, 2 ** 63, -(2 ** 63), -(2 ** 63) - 1,
             2 ** 64, 10 ** 30]
ODD_FLOATS = [0.0, -0.0, 1e-300, 5e-324, 1e308, -1e308, 1.5, -1.5, 2.0000001,
              math.nan, math.inf, -math.inf]
ODD_TEXT = ["", " ", "\x00", "\ud800", "😀" * 3, "[INST]", "<s>", "</s>", "\u202e", "a" * 300,
            "null", "true", "5", "-1", "1e999", "NaN", "{}", "[]"]

#: Keys a ``vllm_xargs``/``extra_args`` object may not carry in these tests: the simulator's
#: per-request test knobs (``sim_error_after`` makes the engine fail on purpose, ``sim_ttft_ms``
#: can hold a request for hours); they are not user input to a real engine.
_SIM_PREFIX = "sim_"

text = st.one_of(st.text(max_size=12), st.sampled_from(ODD_TEXT))


def _scalar_junk() -> st.SearchStrategy:
    return st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.sampled_from(HUGE_INTS),
                     st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(ODD_FLOATS),
                     text)


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


def _mixed(good: st.SearchStrategy, junk_share: int = 5) -> st.SearchStrategy:
    """Mostly ``good``; about 1 in ``junk_share`` draws is junk."""
    return st.one_of(*([good] * (junk_share - 1)), junk)


def _int(ge: int | None = None, le: int | None = None, gt: int | None = None) -> st.SearchStrategy:
    low = ge if ge is not None else (gt + 1 if gt is not None else -3)
    small = st.integers(max(low, -3) if ge is None and gt is None else low, max(low, 0) + 20)
    edges = [v for v in (ge, le, gt) if v is not None]
    edges += [v + d for v in edges for d in (-1, 1)]
    lax = small.flatmap(lambda v: st.sampled_from([str(v), float(v), f" {v} "]))
    return st.one_of(small, small, small, st.sampled_from(edges or [0]), lax,
                     st.sampled_from(HUGE_INTS))


def _float(ge: float | None = None, le: float | None = None) -> st.SearchStrategy:
    low = ge if ge is not None else -3.0
    high = le if le is not None else 3.0
    edges = [v for v in (ge, le) if v is not None] + ODD_FLOATS
    return st.one_of(st.floats(min(low, high), max(low, high)), st.integers(-2, 3),
                     st.sampled_from(edges), st.sampled_from(["0.5", "1", "abc", "1e3"]))


def value_for(validator: Any, depth: int = 0) -> st.SearchStrategy:
    """A strategy for what ``validator`` accepts, with junk mixed in at this level."""
    kind, params = getattr(validator, "spec", ("any", {}))
    return _mixed(_good(kind, params, depth)) if depth < 6 else junk


def _good(kind: str, p: dict, depth: int) -> st.SearchStrategy:
    sub = depth + 1
    if kind == "int":
        return _int(p["ge"], p["le"], p["gt"])
    if kind == "float":
        return _float(p["ge"], p["le"])
    if kind == "bool":
        return st.one_of(st.booleans(), st.booleans(), st.sampled_from([0, 1, "yes", "off", 2]))
    if kind == "str":
        low, high = p["min_length"] or 0, p["max_length"]
        lengths = [n for n in (low, high) if n is not None]
        sized = st.sampled_from(lengths).map(lambda n: "x" * n) if lengths else text
        return st.one_of(text, text, sized)
    if kind == "literal":
        return st.one_of(st.sampled_from(list(p["choices"])), text)
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
    return junk


# ---- chat messages ---------------------------------------------------------------------------

def _part(depth: int) -> st.SearchStrategy:
    kinds = ["text", "input_text", "output_text", "refusal", "thinking", "tool_reference",
             "image_url", "input_audio", "file", "bogus"]
    typed = st.builds(
        lambda kind, payload, extra: {"type": kind, **{k: payload for k in extra}},
        st.sampled_from(kinds), _mixed(text),
        st.lists(st.sampled_from(["text", "refusal", "thinking", "name", "image_url"]),
                 max_size=2))
    return _mixed(st.one_of(typed, typed, text), 4) if depth < 6 else junk


def _tool_call(depth: int) -> st.SearchStrategy:
    function = st.fixed_dictionaries({}, optional={
        "name": _mixed(text), "arguments": _mixed(st.one_of(text, st.just('{"a": 1}'),
                                                            st.dictionaries(text, text)))})
    return _mixed(st.fixed_dictionaries({"function": _mixed(function)}, optional={
        "id": _mixed(text), "type": _mixed(st.sampled_from(["function", "custom"]))}))


def message(roles: tuple[str, ...], depth: int) -> st.SearchStrategy:
    """One chat message: a known or custom role, string/part/none content, and the extras the
    template reads (tool calls, names, reasoning)."""
    content = st.one_of(text, text, st.none(), st.lists(_part(depth + 1), max_size=3))
    body = st.fixed_dictionaries(
        {"role": _mixed(st.sampled_from(list(roles) + ["function", "custom"]), 8),
         "content": _mixed(content, 8)},
        optional={"tool_calls": _mixed(st.lists(_tool_call(depth + 1), max_size=2)),
                  "tool_call_id": _mixed(text), "name": _mixed(text),
                  "reasoning": _mixed(text), "reasoning_content": _mixed(text),
                  "author": junk})
    return _mixed(body, 12)


# ---- whole bodies ----------------------------------------------------------------------------

@st.composite
def _body(draw: Any, fields: list, depth: int, model: bool) -> dict:
    out: dict[str, Any] = {}
    for name, validator, default in fields:
        required = default is MISSING
        if draw(st.integers(0, 9)) < (9 if required else 3):
            out[name] = draw(value_for(validator, depth))
    if model and draw(st.integers(0, 9)) < 8:
        out["model"] = draw(st.one_of(st.just(MODEL), st.just(MODEL), st.just(MODEL), junk))
    if draw(st.integers(0, 9)) == 0:
        out[draw(text)] = draw(junk)
    return out


def body_for(fields: list, depth: int = 0, *, model: bool = True) -> st.SearchStrategy:
    """A request body drawn from the field table ``fields`` (``(name, validator, default)``)."""
    return _body(fields, depth, model)
