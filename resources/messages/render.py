"""The non-streamed ``/v1/messages`` body, and what the stream shares with it: usage and stop reasons
(docs/messages.md §4).

The body is vLLM 0.32's: ``id`` (the chat completion's ``chatcmpl-…``), ``type``, ``role``,
``content`` blocks (``thinking`` with a fresh signature, ``text``, ``tool_use`` with the parsed
arguments; one empty text block when there is nothing), ``model``, ``stop_reason`` and
``stop_sequence`` when set, ``usage``; nulls left out.

Called by: the generation resource's deferred body (``streaming/body.py``).
Runs on: the HTTP hub.
"""
from __future__ import annotations

import json
import uuid
from typing import Any

from base.jsonio import dumps
from resources.chat.parsing import ChoiceParser
from resources.chat.render import final_message
from streaming.output import RequestState
from streaming.prepared import PreparedRequest


def anthropic_usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Chat usage -> Anthropic's: ``input_tokens`` excludes the cache reads and writes, which
    appear only when ``--enable-prompt-tokens-details`` reports them."""
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    out: dict[str, Any] = {"input_tokens": 0, "output_tokens": usage.get("completion_tokens") or 0}
    prompt = usage["prompt_tokens"]
    details = usage.get("prompt_tokens_details")
    if details is not None:
        created = details.get("created_cache_tokens")
        read = details.get("cached_tokens")
        if created is not None:
            prompt -= created
            out["cache_creation_input_tokens"] = created
        if read is not None:
            prompt -= read
            out["cache_read_input_tokens"] = read
    out["input_tokens"] = max(0, prompt)
    return out


def stop_reason(finish_reason: str | None, stop: int | str | None, tool_used: bool,
                tool_complete: bool) -> tuple[str | None, str | None]:
    """(stop_reason, stop_sequence) of a chat finish: ``max_tokens`` always wins; a matched stop
    string wins over tool calls unless they are complete (a call it cut short must not run)."""
    if finish_reason == "length":
        return "max_tokens", None
    if finish_reason not in ("stop", "tool_calls"):
        return None, None
    if tool_complete:
        return "tool_use", None
    if isinstance(stop, str):
        return "stop_sequence", stop
    if finish_reason == "tool_calls" or tool_used:
        return "tool_use", None
    return "end_turn", None


def signature() -> str:
    """A thinking block's signature: random, as vLLM's (it signs nothing)."""
    return uuid.uuid4().hex


def _arguments(text: str) -> Any:
    """A call's arguments as the ``input`` object; None when they are not JSON (a stop
    sequence cut the call short)."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def render_messages_response(prepared: PreparedRequest, state: RequestState) -> bytes:
    """The non-streamed body of the (only) choice."""
    setup = prepared.chat_parsing
    c = state.choices[0]
    parser = None if setup is None else ChoiceParser(setup, c.choice.prompt_token_ids)
    message, finish_reason = final_message(prepared, c, parser)
    calls = message.get("tool_calls") or []
    inputs = [_arguments(call["function"]["arguments"]) for call in calls]
    # NOTE: vLLM fails the request with a 400 when a stop sequence cut a call's arguments (its
    # json.loads raises); greenfront answers as the stream does: the call with an empty input,
    # and stop_sequence since the call is not complete.
    complete = bool(calls) and all(i is not None for i in inputs)
    reason, sequence = stop_reason(finish_reason, c.stop_reason, bool(calls), complete)
    content: list[dict[str, Any]] = []
    if message["reasoning"]:
        content.append({"type": "thinking", "thinking": message["reasoning"],
                        "signature": signature()})
    if message["content"]:
        content.append({"type": "text", "text": message["content"]})
    for call, given in zip(calls, inputs):
        content.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                        "input": {} if given is None else given})
    if not content:
        content.append({"type": "text", "text": ""})
    body: dict[str, Any] = {"id": prepared.request_id, "type": "message", "role": "assistant",
                            "content": content, "model": prepared.model}
    if reason is not None:
        body["stop_reason"] = reason
    if sequence is not None:
        body["stop_sequence"] = sequence
    body["usage"] = anthropic_usage(state.usage())
    if state.kv_transfer_params is not None:
        body["kv_transfer_params"] = state.kv_transfer_params
    if state.ec_transfer_params is not None:
        body["ec_transfer_params"] = state.ec_transfer_params
    return dumps(body)
