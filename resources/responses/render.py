"""/v1/responses output items and the non-streamed body, as vLLM 0.32 writes them.

With output parsers (``resources.chat.parsing``): a ``reasoning`` item when there is a thought,
a ``message`` item when there is text, one ``function_call`` item per call (arguments a JSON
string, ``call_id`` the parser's id). Without parsers: one ``message`` item, whose content is
empty when the model said nothing. ``status`` is "incomplete" when the output hit the token limit.

Runs on: the HTTP hub.
"""
from __future__ import annotations

from typing import Any

from base.jsonio import dumps
from resources.chat.parsing import ChoiceParser
from streaming.output import RequestState
from streaming.prepared import random_request_id
from resources.responses.shell import response_object, usage_json
from text.tool_parsers.ids import new_call_id


def item_id(prefix: str) -> str:
    return f"{prefix}_{random_request_id()}"


def reasoning_item(rid: str, text: str, status: str | None) -> dict:
    return {"id": rid, "summary": [], "type": "reasoning",
            "content": [{"text": text, "type": "reasoning_text"}], "encrypted_content": None,
            "status": status}


def message_item(mid: str, text: str | None, status: str = "completed") -> dict:
    content = [] if text is None else [{"annotations": [], "text": text, "type": "output_text",
                                        "logprobs": None}]
    return {"id": mid, "content": content, "role": "assistant", "status": status,
            "type": "message", "phase": None}


def call_item(fid: str, call_id: str, name: str, arguments: str, status: str) -> dict:
    return {"arguments": arguments, "call_id": call_id, "name": name, "type": "function_call",
            "id": fid, "async": None, "caller": None, "namespace": None, "status": status}


def output_items(prepared: Any, state: RequestState) -> tuple[list[dict], int]:
    """(the output items, reasoning tokens) of the finished request."""
    c = state.choices[0]
    text = c.final_text()
    setup = prepared.chat_parsing
    if setup is None:
        return [message_item(item_id("msg"), text or None)], 0
    parser = ChoiceParser(setup, c.choice.prompt_token_ids)
    parsed = parser.final(text, c.finish_reason or "stop")
    out = []
    if parsed.reasoning:
        out.append(reasoning_item(item_id("rs"), parsed.reasoning, None))
    if parsed.content:
        out.append(message_item(item_id("msg"), parsed.content))
    for call in parsed.tool_calls or []:
        out.append(call_item(item_id("fc"), call.id or new_call_id(), call.name,
                             call.arguments or "", "completed"))
    return out, parser.reasoning_tokens(c.token_ids)


def status_of(state: RequestState) -> str:
    return "incomplete" if state.choices[0].finish_reason == "length" else "completed"


def usage_of(state: RequestState, reasoning_tokens: int) -> dict:
    usage = state.usage()
    details = usage.get("prompt_tokens_details") or {}
    return usage_json(usage["prompt_tokens"], usage["completion_tokens"], reasoning_tokens,
                      details.get("cached_tokens") or 0)


def finished_response(prepared: Any, state: RequestState) -> dict:
    """The response object of a finished non-streamed request."""
    output, reasoning_tokens = output_items(prepared, state)
    return response_object(prepared.shell, output, status_of(state),
                           usage_of(state, reasoning_tokens), state.kv_transfer_params)


def render_responses_response(prepared: Any, state: RequestState) -> bytes:
    """The non-streamed body (stored first when the request is to be stored)."""
    response = finished_response(prepared, state)
    if prepared.save is not None:
        prepared.save(response)
    return dumps(response)
