"""``vllm_xargs`` values: the fast path for strings, ints and lists of them returns what vLLM's
union (``str | int | float | list[str | int | float]``) returns, and every other value still
gets the union's result or its errors."""
from __future__ import annotations

import pytest

from resources.common.fields import INVALID, v_float, v_int, v_list, v_str, v_union
from resources.common.sampling import sampling_fields

UNION = v_union(v_str(), v_int(), v_float(), v_list(v_union(v_str(), v_int(), v_float())))


def _xargs_validator():
    (validator,) = [v for name, v, _ in sampling_fields(4) if name == "vllm_xargs"]
    return validator


@pytest.mark.parametrize("value", [
    "a", "", 7, -(2 ** 70), [1, 2, 3], [], ["a", 5], list(range(53)),
    True, 2.0, 2.5, [True, 1], [1.0, 2], [1, 2.5], [[1]], {"a": 1}, None, [None], ["a", {"b": 1}],
])
def test_each_value_validates_as_the_union_does(value):
    validator = _xargs_validator()
    fast_errors: list = []
    union_errors: list = []
    fast = validator({"k": value}, ("body", "vllm_xargs"), fast_errors)
    slow = UNION(value, ("body", "vllm_xargs", "k"), union_errors)
    assert fast_errors == union_errors
    if slow is INVALID:
        assert fast is INVALID
    else:
        assert fast == {"k": slow}
        assert type(fast["k"]) is type(slow)
        if isinstance(slow, list):
            assert [type(v) for v in fast["k"]] == [type(v) for v in slow]


def test_a_list_is_copied_not_shared():
    ids = [1, 2, 3]
    out = _xargs_validator()({"k": ids}, ("body", "vllm_xargs"), [])
    assert out["k"] == ids and out["k"] is not ids
