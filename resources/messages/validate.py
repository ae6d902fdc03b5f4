"""The nested objects of an Anthropic Messages request, checked as vLLM 0.32's pydantic models check
them (docs/messages.md §2): content blocks, messages, tools, tool changes, ``tool_choice``,
``thinking`` and ``output_config``, with pydantic's error types, locations and wording.

Each ``v_*`` is a validator of ``resources.common.fields`` (``(value, loc, errors) -> value``)
returning plain dicts: only what the conversion (``resources.messages.convert``) reads.

Called by: ``resources.messages.types``.
Runs on: request pool threads (pure functions).
"""
from __future__ import annotations

from typing import Any, Callable

from resources.common.fields import (INVALID, MISSING, Field, Validator, add_error, described,
                                     v_any, v_bool, v_dict, v_int, v_list, v_literal,
                                     v_nullable, v_str, v_union, with_schema)

BLOCK_TYPES = ("text", "image", "tool_use", "tool_result", "tool_reference", "thinking",
               "redacted_thinking", "tool_addition", "tool_removal")
TOOL_CHANGES = ("tool_addition", "tool_removal")


def value_error(errors: list, loc: tuple, message: str, value: Any) -> object:
    """pydantic's error for a validator that raised ``ValueError(message)``."""
    return add_error(errors, "value_error", loc, f"Value error, {message}", value,
                     {"error": ValueError(message)})


def v_model(class_name: str, fields: list[Field],
            after: Callable[[dict], str | None] | None = None) -> Validator:
    """A pydantic model field: a JSON object whose ``fields`` are checked in order (unknown keys
    ignored); ``after`` returns a "mode=after" validator's message, or None."""
    def check(value: Any, loc: tuple, errors: list) -> Any:
        if not isinstance(value, dict):
            return add_error(errors, "model_type", loc, "Input should be a valid dictionary or "
                             f"instance of {class_name}", value, {"class_name": class_name})
        before = len(errors)
        out: dict[str, Any] = {}
        for name, validator, default in fields:
            if name in value:
                out[name] = validator(value[name], loc + (name,), errors)
            elif default is MISSING:
                add_error(errors, "missing", loc + (name,), "Field required", value)
            else:
                out[name] = default
        if len(errors) != before:
            return INVALID
        message = after(out) if after is not None else None
        return out if message is None else value_error(errors, loc, message, value)
    required = [name for name, _, default in fields if default is MISSING]
    return with_schema(described(check, "object", fields=fields),
                       {"type": "object", "title": class_name, "required": required})


def v_tagged(tags: dict[str, Validator], discriminator: str = "type") -> Validator:
    """A pydantic discriminated union: the member named by ``value[discriminator]``; a member's
    errors are located under its tag."""
    expected = ", ".join(f"'{t}'" for t in tags)

    def check(value: Any, loc: tuple, errors: list) -> Any:
        if not isinstance(value, dict):
            return add_error(errors, "model_attributes_type", loc, "Input should be a valid "
                             "dictionary or object to extract fields from", value)
        if discriminator not in value:
            return add_error(errors, "union_tag_not_found", loc, "Unable to extract tag using "
                             f"discriminator '{discriminator}'", value,
                             {"discriminator": f"'{discriminator}'"})
        tag = value[discriminator]
        if not isinstance(tag, str) or tag not in tags:
            return add_error(errors, "union_tag_invalid", loc, f"Input tag '{tag}' found using "
                             f"'{discriminator}' does not match any of the expected tags: "
                             f"{expected}", value, {"discriminator": f"'{discriminator}'",
                                                    "tag": str(tag), "expected_tags": expected})
        return tags[tag](value, loc + (tag,), errors)
    return with_schema(described(check, "union", alternatives=tuple(tags.values())),
                       {"anyOf": [getattr(v, "json_schema", {}) for v in tags.values()]})


def _with_default_type(schema: dict) -> dict:
    # vLLM's tool validator fills in an object type when the schema names none.
    if "type" not in schema:
        schema["type"] = "object"
    return schema


def _input_schema(value: Any, loc: tuple, errors: list) -> Any:
    out = v_dict()(value, loc, errors)
    return INVALID if out is INVALID else _with_default_type(out)


described(_input_schema, "dict", item=v_any())


TOOL = v_model("AnthropicTool", [
    ("name", v_str(), MISSING),
    ("description", v_nullable(v_str()), None),
    ("input_schema", with_schema(_input_schema, {"type": "object"}), MISSING),
    ("strict", v_nullable(v_bool()), None),
    ("defer_loading", v_nullable(v_bool()), None),
])

TOOL_CHANGE = v_tagged({
    "tool_reference": v_model("AnthropicToolChangeReference", [
        ("type", v_literal("tool_reference"), MISSING), ("name", v_str(), MISSING)]),
    "tool_definition": v_model("AnthropicToolChangeDefinition", [
        ("type", v_literal("tool_definition"), MISSING), ("definition", TOOL, MISSING)]),
})


def _block_after(block: dict) -> str | None:
    kind = block["type"]
    if kind not in TOOL_CHANGES:
        return None
    if block["tool"] is None:
        return f"tool is required for {kind} blocks"
    if kind == "tool_removal" and block["tool"]["type"] != "tool_reference":
        return "tool_removal only accepts a tool_reference"
    return None


_STR = v_nullable(v_str())
BLOCK = v_model("AnthropicContentBlock", [
    ("type", v_literal(*BLOCK_TYPES), MISSING),
    ("text", _STR, None),
    ("source", v_nullable(v_dict()), None),
    ("id", _STR, None),
    ("tool_use_id", _STR, None),
    ("name", _STR, None),
    ("input", v_nullable(v_dict()), None),
    ("content", v_nullable(v_union(v_str(), v_list(v_dict()))), None),
    ("is_error", v_nullable(v_bool()), None),
    ("tool_name", _STR, None),
    ("thinking", _STR, None),
    ("signature", _STR, None),
    ("data", _STR, None),
    ("tool", v_nullable(TOOL_CHANGE), None),
], after=_block_after)


#: ``str | list[AnthropicContentBlock]`` (message content and ``system``).
CONTENT = v_union(v_str(), v_list(BLOCK))


def tool_change_misplaced(content: Any) -> str | None:
    """The message for tool changes outside a system message (None: there are none)."""
    if not isinstance(content, list):
        return None
    for block in content:
        if block["type"] in TOOL_CHANGES:
            return f'{block["type"]} blocks are only allowed in messages with role "system"'
    return None


MESSAGE = v_model("AnthropicMessage", [
    ("role", v_literal("user", "assistant", "system"), MISSING),
    ("content", CONTENT, MISSING),
], after=lambda m: None if m["role"] == "system" else tool_change_misplaced(m["content"]))


def _choice_after(choice: dict) -> str | None:
    if choice["type"] == "tool" and not choice["name"]:
        return "tool_choice.name is required when type is 'tool'"
    return None


TOOL_CHOICE = v_model("AnthropicToolChoice", [
    ("type", v_literal("auto", "any", "tool", "none"), MISSING),
    ("name", _STR, None),
    ("disable_parallel_tool_use", v_nullable(v_bool()), None),
], after=_choice_after)

EFFORTS = ("low", "medium", "high", "xhigh", "max")
_DISPLAY = v_nullable(v_literal("summarized", "omitted", "updates"))
THINKING = v_tagged({
    "enabled": v_model("AnthropicThinkingConfigEnabled", [
        ("type", v_literal("enabled"), MISSING), ("budget_tokens", v_int(ge=1024), MISSING),
        ("display", _DISPLAY, None)]),
    "disabled": v_model("AnthropicThinkingConfigDisabled", [
        ("type", v_literal("disabled"), MISSING)]),
    "adaptive": v_model("AnthropicThinkingConfigAdaptive", [
        ("type", v_literal("adaptive"), MISSING), ("display", _DISPLAY, None)]),
})


OUTPUT_CONFIG = v_model("AnthropicOutputConfig", [
    ("effort", v_nullable(v_literal(*EFFORTS)), None),
    ("format", v_nullable(v_model("AnthropicJsonOutputFormat", [
        ("schema", v_nullable(v_dict()), None),
        ("type", v_literal("json_schema"), "json_schema")])), None),
])
