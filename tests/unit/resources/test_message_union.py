"""The chat message validator against vLLM 0.32's own pydantic union, case by case.

``tests/unit/data/vllm_032_message_union.json`` was generated once from vLLM 0.32 (a
``TypeAdapter`` over ``ChatCompletionMessageParam``): each message with every wrong-typed field a
member declares, and the errors pydantic reports (none when a member accepts it). A wrong type
must be a 400 with those errors, never a 500 later (``tool_calls: true`` was one).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from base.errors import ApiError
from resources.chat.validate import v_message
from resources.common.fields import INVALID
from resources.tokenize import tokenize

CASES = json.loads((Path(__file__).parents[1] / "data" / "vllm_032_message_union.json")
                   .read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: json.dumps(c["message"]))
def test_errors_as_vllm(case):
    errors: list = []
    result = v_message(case["message"], (), errors)
    assert [[e["type"], e["loc"], e["msg"]] for e in errors] == case["errors"]
    assert (result is INVALID) == bool(case["errors"])


@pytest.mark.parametrize("bad", [True, 5])
@pytest.mark.parametrize("field", ["tool_calls", "content", "name"])
def test_tokenize_chat_form_answers_400(ctx, field, bad):
    message = {"role": "assistant", "content": "x", field: bad}
    with pytest.raises(ApiError) as info:
        tokenize({"messages": [message]}, ctx)
    assert info.value.status == 400
