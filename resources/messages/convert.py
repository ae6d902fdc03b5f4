"""Anthropic Messages request -> a chat completions body, as vLLM 0.32 converts it (docs/messages.md §3).

``system`` (string or text blocks, Claude Code's billing header dropped) becomes the leading
system message; ``thinking`` blocks become the assistant message's ``reasoning``, ``tool_use``
blocks its ``tool_calls`` (arguments as Python's ``json.dumps`` writes them, as vLLM does), a
user's ``tool_result`` blocks ``tool`` messages; ``tool_choice`` auto/any/none/tool becomes
"auto"/"required"/"none"/a named choice (``disable_parallel_tool_use`` → ``parallel_tool_calls``);
``thinking`` maps to ``reasoning_effort`` (disabled) or ``thinking_token_budget`` (enabled);
``output_config`` to ``response_format`` and ``reasoning_effort``. The chat body then goes through
chat's own parse and prepare steps (``resources.chat.convert``): template, tools, reasoning and
structured outputs are chat's.

Called by: ``resources.messages.resource``.
Runs on: request pool threads.
"""
from __future__ import annotations

import json
import time
from typing import Any

from base.errors import InvalidRequest
from resources.messages.types import CountTokensRequest, MessagesRequest

BILLING_HEADER = "x-anthropic-billing-header"


def _image_url(source: dict[str, Any]) -> str:
    if source.get("type") == "url":
        return source.get("url", "")
    return f"data:{source.get('media_type', 'image/jpeg')};base64,{source.get('data', '')}"


def _system_text(content: str | list[dict]) -> str | None:
    """A system message's text, billing headers dropped (None: nothing left)."""
    if isinstance(content, str):
        return None if content.startswith(BILLING_HEADER) else content
    parts = [b["text"] for b in content if b["type"] == "text" and b["text"]
             and not b["text"].startswith(BILLING_HEADER)]
    return "".join(parts) if parts else None


def _leading_system(f: CountTokensRequest, merge_inline: bool) -> list[dict]:
    parts: list[str] = []
    if f.system:
        if isinstance(f.system, str):
            parts.append(f.system)
        else:
            parts.extend(b["text"] for b in f.system if b["type"] == "text" and b["text"]
                         and not b["text"].startswith(BILLING_HEADER))
    if merge_inline:
        for msg in f.messages:
            text = _system_text(msg["content"]) if msg["role"] == "system" else None
            if text:
                parts.append(text)
    return [{"role": "system", "content": "".join(parts)}] if parts else []


def _tool_result(block: dict, out: list[dict]) -> None:
    """A user's tool_result: a ``tool`` message (images and tool references after it)."""
    content = block["content"]
    text, images, references = "", [], []
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = []
        for item in content:
            kind = item.get("type")
            if kind == "text":
                texts.append(item.get("text", ""))
            elif kind == "image":
                url = _image_url(item.get("source", {}))
                if url:
                    images.append(url)
            elif kind == "tool_reference":
                name = item.get("tool_name") or item.get("name")
                if name:
                    references.append({"type": "tool_reference", "name": name})
        text = "\n".join(texts)
    call_id = block["tool_use_id"] or ""
    out.append({"role": "tool", "tool_call_id": call_id, "content": text or ""})
    if images:
        out.append({"role": "user", "content": [{"type": "image_url", "image_url": {"url": u}}
                                                for u in images]})
    if references:
        out.append({"role": "tool", "tool_call_id": call_id, "content": references})


def _blocks(msg: dict, out: list[dict]) -> dict:
    """One message's blocks -> its chat message (tool messages appended to ``out`` first)."""
    role = msg["role"]
    message: dict[str, Any] = {"role": role}
    parts: list[dict] = []
    calls: list[dict] = []
    reasoning: list[str] = []
    for block in msg["content"]:
        kind = block["type"]
        if kind == "text" and block["text"]:
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image" and block["source"]:
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block["source"])}})
        elif kind == "thinking" and block["thinking"] is not None:
            reasoning.append(block["thinking"])
        elif kind == "tool_use":
            calls.append({"id": block["id"] or f"call_{int(time.time())}", "type": "function",
                          "function": {"name": block["name"] or "",
                                       "arguments": json.dumps(block["input"] or {})}})
        elif kind == "tool_result" and role == "user":
            _tool_result(block, out)
        elif kind == "tool_result":
            # NOTE: vLLM writes a non-user tool_result as text with Python's str() of it.
            shown = str(block["content"]) if block["content"] else ""
            parts.append({"type": "text", "text": f"Tool result: {shown}"})
    if reasoning:
        message["reasoning"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    if parts:
        single = len(parts) == 1 and parts[0]["type"] == "text"
        message["content"] = parts[0]["text"] if single else parts
    return message


def chat_messages(f: CountTokensRequest, merge_inline: bool) -> list[dict]:
    """The chat messages of a Messages request."""
    out = _leading_system(f, merge_inline)
    for msg in f.messages:
        if msg["role"] == "system":
            text = None if merge_inline else _system_text(msg["content"])
            if text:
                out.append({"role": "system", "content": text})
            continue
        if isinstance(msg["content"], str):
            message = {"role": msg["role"], "content": msg["content"]}
        else:
            message = _blocks(msg, out)
        if not (message["role"] == "user" and "content" not in message):
            out.append(message)
    return out


def _resolved_tools(f: CountTokensRequest) -> list[dict] | None:
    """``tools`` after the conversation's tool_addition/tool_removal blocks: the tools in effect
    at its end (a template sees one list)."""
    changes = [b for m in f.messages if not isinstance(m["content"], str)
               for b in m["content"] if b["type"] in ("tool_addition", "tool_removal")]
    if not changes:
        return f.tools
    tools = {t["name"]: t for t in f.tools or []}
    removed: set[str] = set()
    for block in changes:
        change = block["tool"]
        if change["type"] == "tool_definition":
            name = change["definition"]["name"]
            tools[name] = change["definition"]
        else:
            name = change["name"]
            if name not in tools:
                raise InvalidRequest(f"{block['type']} references tool {name!r}, which is not "
                                 "declared in tools")
            if block["type"] == "tool_addition":
                tools[name] = {**tools[name], "defer_loading": None}
        if block["type"] == "tool_removal":
            removed.add(name)
        else:
            removed.discard(name)
    return [tool for name, tool in tools.items() if name not in removed]


def _tools_and_choice(f: CountTokensRequest, body: dict) -> None:
    choice = f.tool_choice
    if choice is not None:
        body["parallel_tool_calls"] = not choice["disable_parallel_tool_use"]
        kind = choice["type"]
        body["tool_choice"] = ({"type": "function", "function": {"name": choice["name"]}}
                               if kind == "tool" else
                               {"auto": "auto", "any": "required", "none": "none"}[kind])
    tools = _resolved_tools(f)
    if tools is None:
        return
    body["tools"] = [{"type": "function", "function": {
        "name": t["name"], "description": t["description"], "parameters": t["input_schema"],
        "strict": t["strict"], "defer_loading": t["defer_loading"]}} for t in tools]
    body.setdefault("tool_choice", "auto")


def _output_and_thinking(f: CountTokensRequest, body: dict, disabled_effort: str) -> None:
    config = f.output_config
    if config and config["format"] and config["format"]["schema"]:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "schema": config["format"]["schema"], "name": config["format"]["type"]}}
    if config and config["effort"] is not None:
        body["reasoning_effort"] = config["effort"]
    thinking = f.thinking
    if thinking is not None and thinking["type"] == "disabled":
        body["reasoning_effort"] = disabled_effort
    elif thinking is not None and thinking["type"] == "enabled":
        body["thinking_token_budget"] = thinking["budget_tokens"]


def chat_body(f: CountTokensRequest, *, merge_inline: bool, disabled_effort: str) -> dict:
    """The /v1/chat/completions body vLLM builds from a Messages (or count_tokens) request."""
    body: dict[str, Any] = {"model": f.model, "messages": chat_messages(f, merge_inline),
                            "chat_template_kwargs": f.chat_template_kwargs}
    if isinstance(f, MessagesRequest):
        body.update(max_tokens=f.max_tokens, max_completion_tokens=f.max_tokens,
                    stop=f.stop_sequences, temperature=f.temperature, top_p=f.top_p,
                    top_k=f.top_k, watermarking=f.watermarking, cache_salt=f.cache_salt,
                    kv_transfer_params=f.kv_transfer_params, vllm_xargs=f.vllm_xargs)
        if f.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    _output_and_thinking(f, body, disabled_effort)
    _tools_and_choice(f, body)
    return body
