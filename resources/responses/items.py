"""Responses ``input`` items and ``tools`` -> the chat pipeline's messages and tools.

vLLM 0.32's rules, restated: ``instructions`` is a leading system message; a string ``input`` is
one user message; items become chat messages in order, where a ``function_call`` or a
``reasoning`` item joins the assistant message just before it (one assistant turn may carry
reasoning, text and several calls), a ``function_call_output`` is a tool message, and a message
item passes through with its role. A last assistant message or reasoning item whose status is
``in_progress``/``incomplete`` is continued instead of starting a new turn.

Runs on: request pool threads (pure functions).
"""
from __future__ import annotations

from typing import Any

from base.errors import InvalidRequest


def _item_type(item: dict) -> str:
    return item.get("type") or ("message" if "role" in item else "")


def _text_of(content: Any) -> str | None:
    """An assistant message's text: the string, or its first part's text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return content[0].get("text")
    return None


def _open_assistant(messages: list[dict]) -> dict | None:
    last = messages[-1] if messages else None
    return last if last is not None and last.get("role") == "assistant" else None


def _add_call(messages: list[dict], item: dict) -> None:
    name, call_id = item.get("name"), item.get("call_id")
    arguments = item.get("arguments")
    if not isinstance(name, str) or not isinstance(call_id, str) or not isinstance(arguments, str):
        raise InvalidRequest("A function_call item needs string `call_id`, `name` and "
                             "`arguments`.", param="input")
    if item.get("namespace"):
        name = f"{item['namespace']}__{name}"
    call = {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}
    prev = _open_assistant(messages)
    if prev is not None:
        prev.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "tool_calls": [call]})


def _add_reasoning(messages: list[dict], item: dict) -> None:
    if item.get("encrypted_content"):
        raise InvalidRequest("Encrypted content is not supported.", param="input")
    text = ""
    content, summary = item.get("content"), item.get("summary")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        text = content[0].get("text") or ""
    elif isinstance(summary, list) and summary and isinstance(summary[0], dict):
        text = summary[0].get("text") or ""
    prev = _open_assistant(messages)
    if prev is not None and prev.get("reasoning") is None:
        prev["reasoning"] = text
    else:
        messages.append({"role": "assistant", "reasoning": text})


def _add_message(messages: list[dict], item: dict) -> None:
    role = item.get("role")
    if role == "assistant":
        text = _text_of(item.get("content"))
        if text is None:
            raise InvalidRequest("An assistant message item needs text content.", param="input")
        prev = _open_assistant(messages)
        if prev is not None and prev.get("content") is None:
            prev["content"] = text
        else:
            messages.append({"role": "assistant", "content": text})
        return
    if not isinstance(role, str):
        raise InvalidRequest("A message item needs a `role`.", param="input")
    messages.append({"role": role, "content": item.get("content")})


def input_messages(items: list[Any]) -> list[dict]:
    """The chat messages of a list ``input``.

    Raises:
        InvalidRequest: an item of a type the API does not take here.
    """
    messages: list[dict] = []
    for item in items:
        if not isinstance(item, dict):
            raise InvalidRequest("Each input item must be an object.", param="input")
        kind = _item_type(item)
        if kind == "message":
            _add_message(messages, item)
        elif kind == "function_call":
            _add_call(messages, item)
        elif kind == "reasoning":
            _add_reasoning(messages, item)
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "content": output,
                             "tool_call_id": item.get("call_id")})
        else:
            raise InvalidRequest(f"Unsupported input item type: {kind or None}", param="input")
    return messages


def continues_last(items: Any) -> bool:
    """The last item is an unfinished assistant message or thought, to be continued."""
    if not isinstance(items, list) or not items or not isinstance(items[-1], dict):
        return False
    last = items[-1]
    return (last.get("type", "message") in ("message", "reasoning")
            and last.get("status") in ("in_progress", "incomplete"))


def chat_tools(tools: list[Any]) -> list[dict] | None:
    """Responses' flat function tools as chat tools (None when there are none).

    Raises:
        InvalidRequest: a tool that is not a function (built-in tools are not served).
    """
    out = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise InvalidRequest(f"Tool type {kind!r} is not supported: only function tools "
                                 "are.", param="tools")
        if not isinstance(tool.get("name"), str):
            raise InvalidRequest("A function tool needs a `name`.", param="tools")
        function = {k: v for k, v in tool.items() if k != "type"}
        out.append({"type": "function", "function": function})
    return out or None


def echoed_tool(tool: dict) -> dict:
    """A function tool as vLLM echoes it in the response (every field of its model)."""
    return {"name": tool["name"], "parameters": tool.get("parameters"),
            "strict": tool.get("strict"), "type": "function",
            "allowed_callers": tool.get("allowed_callers"), "async": tool.get("async"),
            "defer_loading": tool.get("defer_loading"),
            "description": tool.get("description"),
            "output_schema": tool.get("output_schema")}
