"""vLLM's 400 for a chat content part it cannot read, worded as pydantic words it.

vLLM 0.32 types a message's list ``content`` as a lazily validated ``Iterable`` of the role's
OpenAI content-part union; the first part that no member of the union accepts raises pydantic's
``ValidationError`` while the prompt is being built, and vLLM answers 400 ``BadRequestError``
(``param`` null) with its ``str()``:

    7 validation errors for ValidatorIterator
    0.ChatCompletionContentPartTextParam.text
      Input should be a valid string [type=string_type, input_value=True, input_type=bool]
        For further information visit https://errors.pydantic.dev/2.14/v/string_type
    ...

(observed live against vLLM 0.32's Python frontend). ``part_error`` restates the member tables
and that format for the parts greenfront itself cannot read (not an object, or a text payload
that is not a string), so that those get vLLM's answer instead of a TypeError.

Called by: ``text.chat_template`` while it collects a message's text.
Runs on: request pool threads (pure functions).
"""
from __future__ import annotations

from typing import Any

# Per member: (class name, fields in declaration order as (name, kind)); kind "str" = a string,
# "dict" = an object, "type" = the literal that names the member.
_TEXT = ("ChatCompletionContentPartTextParam", (("text", "str"), ("type", "text")))
_IMAGE = ("ChatCompletionContentPartImageParam", (("image_url", "dict"), ("type", "image_url")))
_AUDIO = ("ChatCompletionContentPartInputAudioParam",
          (("input_audio", "dict"), ("type", "input_audio")))
_FILE = ("File", (("file", "dict"), ("type", "file")))
_REFUSAL = ("ChatCompletionContentPartRefusalParam", (("refusal", "str"), ("type", "refusal")))

# The union each OpenAI message role types its list content with; a one-member union is
# reported without the class name in ``loc``.
ROLE_UNIONS: dict[str, tuple] = {
    "system": (_TEXT,), "developer": (_TEXT,), "tool": (_TEXT,),
    "assistant": (_TEXT, _REFUSAL),
    "user": (_TEXT, _IMAGE, _AUDIO, _FILE),
}
_DOCS = "https://errors.pydantic.dev/2.14/v/"
_TYPE_NAMES = {bool: "bool", int: "int", float: "float", str: "str", list: "list",
               dict: "dict", type(None): "NoneType"}


def _shown(value: Any) -> str:
    """pydantic's ``input_value``: the repr, its middle elided past 50 characters."""
    text = repr(value)
    return text if len(text) <= 50 else text[:25] + "..." + text[-24:]


def _line(loc: str, msg: str, kind: str, value: Any) -> str:
    name = _TYPE_NAMES.get(type(value), type(value).__name__)
    return (f"{loc}\n  {msg} [type={kind}, input_value={_shown(value)}, input_type={name}]\n"
            f"    For further information visit {_DOCS}{kind}")


def _member_errors(loc: str, fields: tuple, part: Any) -> list[str]:
    if not isinstance(part, dict):
        return [_line(loc, "Input should be a valid dictionary", "dict_type", part)]
    out = []
    for name, kind in fields:
        at = f"{loc}.{name}"
        if name not in part:
            out.append(_line(at, "Field required", "missing", part))
            continue
        value = part[name]
        if kind == "str" and not isinstance(value, str):
            out.append(_line(at, "Input should be a valid string", "string_type", value))
        elif kind == "dict" and not isinstance(value, dict):
            out.append(_line(at, "Input should be a valid dictionary", "dict_type", value))
        elif kind not in ("str", "dict") and value != kind:
            out.append(_line(at, f"Input should be '{kind}'", "literal_error", value))
    return out


def part_error(role: str, index: int, part: Any) -> str | None:
    """vLLM's message for content part ``index`` of a ``role`` message, or None when the role
    has no OpenAI union (custom roles) or a member accepts the part."""
    union = ROLE_UNIONS.get(role)
    if union is None:
        return None
    errors: list[str] = []
    for name, fields in union:
        loc = str(index) if len(union) == 1 else f"{index}.{name}"
        found = _member_errors(loc, fields, part)
        if not found:
            return None
        errors.extend(found)
    count = len(errors)
    head = f"{count} validation error{'s' if count != 1 else ''} for ValidatorIterator"
    return "\n".join([head] + errors)
