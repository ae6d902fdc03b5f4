"""Chat messages -> the conversation a chat template renders (vLLM 0.32's "string" content format).

Owns what happens to request messages before any template runs (docs/text-parity.md §4.2): content
parts joined with "\n" (text parts only; media and unknown parts refused with vLLM's messages;
Claude Code's billing-header part dropped), assistant tool-call arguments parsed into dicts,
``developer`` mapped to ``system`` for templates that do not know it, and ``ChatTemplateError``,
the 400 a chat prompt fails with.

Called by ``text.chat_template``. Runs on: request pool threads (pure Python).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from text.content_parts import part_error

# Content-part types whose payload is text, and the key holding it.
_TEXT_PART_KEYS = {
    "text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal",
    "thinking": "thinking",
}
# Parts of these types with a null payload are skipped rather than rejected.
_SKIP_IF_NULL = frozenset({"text", "refusal"})
_MEDIA_PART_TYPES = frozenset({
    "image_url", "input_image", "image_embeds", "image_pil", "audio_url", "input_audio",
    "audio_embeds", "video_url", "video_embeds", "prompt_embeds",
})
_MEDIA_KEYS = ("image_url", "image_pil", "image_embeds", "audio_embeds", "video_embeds",
               "prompt_embeds", "audio_url", "input_audio", "video_url", "tool_reference")
_SUPPORTED_PART_TYPES = sorted(_TEXT_PART_KEYS.keys() | _MEDIA_PART_TYPES | {"tool_reference"})
# Claude Code puts a per-request attribution line first in its system prompt; vLLM drops it.
_BILLING_HEADER = "x-anthropic-billing-header"


class ChatTemplateError(ValueError):
    """A chat prompt could not be rendered; `str(err)` is the client-facing message.

    `parameter` names the offending request field when vLLM reports one.
    """

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter



def _part_text(part: Mapping[str, Any]) -> Any:
    """The payload of one content part object (not checked to be a string), None to skip it;
    raises for parts a text model rejects."""
    part_type = part.get("type")
    if part_type is None or part.get("uuid") is not None:
        for key in _MEDIA_KEYS:
            if key in part:
                part_type = key
                break
        else:
            raise ChatTemplateError("Missing 'type' field in multimodal part.", parameter="type")
    if not isinstance(part_type, str):
        raise ChatTemplateError("Invalid 'type' field in multimodal part.", parameter="type")
    if part_type in _TEXT_PART_KEYS:
        text = part.get(_TEXT_PART_KEYS[part_type])
        if text is None and part_type in _SKIP_IF_NULL:
            return None
        return text
    if part_type == "tool_reference":
        return part.get("name")
    if part_type in _MEDIA_PART_TYPES:
        # NOTE: greenfront serves text-only models; vLLM would fail later in its media parser.
        raise ChatTemplateError(
            f"Content part type {part_type!r} is not supported by this text-only model.",
            parameter="type")
    raise ChatTemplateError(
        f"Unsupported chat content part type: {part_type!r}. "
        f"Supported types: {', '.join(_SUPPORTED_PART_TYPES)}.",
        parameter="type")


def _strip_billing_header(parts: list[Any]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        if isinstance(part, str):
            text = part
        elif isinstance(part, Mapping) and part.get("type") == "text":
            text = part.get("text")
        else:
            text = None
        if not (isinstance(text, str) and text.startswith(_BILLING_HEADER)):
            out.append(part)
            continue
        rest = text.partition("\n")[2]
        if rest:
            out.append(rest if isinstance(part, str) else {**part, "text": rest})
    return out


def _content_text(role: str, content: Any) -> str:
    if content is None:
        parts: list[Any] = []
    elif isinstance(content, str):
        parts = [content]
    elif isinstance(content, Mapping) and content:
        # vLLM iterates an object as its keys, none of which is a part object.
        raise ChatTemplateError(part_error(role, 0, next(iter(content))) or
                                "Message content must be a string or a list of parts.")
    else:
        parts = list(content)
    if role == "system":
        parts = _strip_billing_header(parts)
    texts = []
    for index, part in enumerate(parts):
        text = _part_text(part) if isinstance(part, Mapping) else part
        if not isinstance(part, Mapping | str) or (text is not None and not isinstance(text, str)):
            # Not an object, or a text payload that is no string: vLLM's pydantic 400.
            raise ChatTemplateError(part_error(role, index, part) or (
                f"Content part {index} must be a string or an object with a string payload."))
        if text:  # empty parts are dropped, not joined: ["", "no"] -> "no"
            texts.append(text)
    return "\n".join(texts)


def _normalize_tool_calls(message: dict[str, Any]) -> None:
    """Assistant tool-call arguments become dicts, as tool-use templates expect."""
    tool_calls = message.get("tool_calls")
    if not isinstance(tool_calls, list):
        return
    if not tool_calls:
        # An empty list would push templates onto their tool-call path for nothing.
        del message["tool_calls"]
        return
    for item in tool_calls:
        if not isinstance(item, dict):
            raise ChatTemplateError("assistant tool_calls entries must be objects.",
                                    parameter="tool_calls")
        function = item.get("function")
        if item.get("type", "function") != "function" or not isinstance(function, dict):
            raise ChatTemplateError(
                "chat completions only support assistant tool_calls of type 'function'.",
                parameter="tool_calls")
        arguments = function.get("arguments")
        if isinstance(arguments, dict) and arguments:
            continue
        parsed: Any = None
        if arguments and isinstance(arguments, str):
            try:
                parsed = json.loads(arguments)
            except json.JSONDecodeError:
                # Malformed history must not make every later turn fail: use {}.
                parsed = None
        function["arguments"] = parsed if isinstance(parsed, dict) else {}


def parse_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Request messages (validated OpenAI dicts) -> the message dicts the template sees.

    The caller's objects are not modified.
    """
    conversation: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        out: dict[str, Any] = {"role": role, "content": _content_text(role, message.get("content"))}
        if role == "assistant":
            if message.get("tool_calls") is not None:
                out["tool_calls"] = copy.deepcopy(list(message["tool_calls"]))
            reasoning = message.get("reasoning")
            if reasoning is not None:
                out["reasoning"] = reasoning
                out["reasoning_content"] = reasoning
        elif role == "tool" and "tool_call_id" in message:
            out["tool_call_id"] = message["tool_call_id"]
        if isinstance(message.get("name"), str):
            out["name"] = message["name"]
        if isinstance(message.get("task"), str):
            out["task"] = message["task"]
        if role == "developer":
            out["tools"] = message.get("tools")
        if role == "assistant":
            _normalize_tool_calls(out)
        conversation.append(out)
    return conversation


def developer_as_system(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`developer` -> `system`, then all system messages merged into one at the front if there
    is more than one or one that is not first (templates often insist on a leading system)."""
    converted = []
    for msg in conversation:
        if msg["role"] == "developer":
            msg = {k: v for k, v in msg.items() if k != "tools"}
            msg["role"] = "system"
        converted.append(msg)
    system_texts: list[str] = []
    others: list[dict[str, Any]] = []
    merge = False
    for i, msg in enumerate(converted):
        if msg["role"] != "system":
            others.append(msg)
            continue
        if i > 0 or system_texts:
            merge = True
        content = msg.get("content", "")
        if isinstance(content, list):
            content = "\n".join(
                p["text"] if isinstance(p, dict) else p
                for p in content if (isinstance(p, dict) and "text" in p) or isinstance(p, str))
        if content:
            system_texts.append(content)
    if not merge:
        return converted
    return [{"role": "system", "content": "\n\n".join(system_texts)}, *others]
