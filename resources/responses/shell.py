"""The response object of /v1/responses: the request's echoed fields, in vLLM 0.32's key order.

vLLM echoes the request (``instructions``, ``metadata``, ``tools`` with every field of their
model, ``tool_choice`` — "none" when no tools were given —, ``reasoning``, ``text``) and the
effective sampling values (``temperature``, ``top_p``, the penalties, and ``max_output_tokens``
as the limit actually applied).

Runs on: request pool threads (the shell), the HTTP hub (filling it in).
"""
from __future__ import annotations

from typing import Any

from streaming.prepared import PreparedRequest
from resources.responses.items import echoed_tool


def _reasoning(value: Any) -> dict | None:
    if not isinstance(value, dict):
        return None
    return {"context": value.get("context"), "effort": value.get("effort"),
            "generate_summary": value.get("generate_summary"), "mode": value.get("mode"),
            "summary": value.get("summary")}


def _text(value: Any) -> dict | None:
    if not isinstance(value, dict):
        return None
    fmt = value.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        fmt = {"name": fmt.get("name"), "schema": fmt.get("schema"), "type": "json_schema",
               "description": fmt.get("description"), "strict": fmt.get("strict")}
    elif isinstance(fmt, dict):
        fmt = {"type": fmt.get("type")}
    return {"format": fmt, "verbosity": value.get("verbosity")}


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict):
        return {"name": choice.get("name"), "type": choice.get("type")}
    return choice


def response_shell(body: dict, prepared: PreparedRequest, tools: list, tool_choice: Any) -> dict:
    """Every field of the response object but ``output``, ``status``, ``usage`` (filled in by
    ``response_object``)."""
    sp = prepared.choices[0].sampling_params
    parallel = body.get("parallel_tool_calls")
    return {
        "id": prepared.request_id, "created_at": prepared.created, "incomplete_details": None,
        "instructions": body.get("instructions"), "metadata": body.get("metadata"),
        "model": prepared.model, "object": "response", "output": [],
        "parallel_tool_calls": True if parallel is None else parallel,
        "temperature": float(sp.temperature), "tool_choice": _tool_choice(tool_choice),
        "tools": [echoed_tool(t) for t in tools], "top_p": float(sp.top_p),
        "background": bool(body.get("background", False)), "max_output_tokens": sp.max_tokens,
        "max_tool_calls": body.get("max_tool_calls"),
        "previous_response_id": body.get("previous_response_id"), "prompt": None,
        "reasoning": _reasoning(body.get("reasoning")),
        "service_tier": body.get("service_tier") or "auto", "status": "in_progress",
        "text": _text(body.get("text")), "top_logprobs": sp.logprobs,
        "truncation": body.get("truncation") or "disabled", "usage": None,
        "user": body.get("user"), "presence_penalty": float(sp.presence_penalty),
        "frequency_penalty": float(sp.frequency_penalty), "kv_transfer_params": None,
        "ec_transfer_params": None, "input_messages": None, "output_messages": None,
    }


def usage_json(prompt: int, output: int, reasoning: int, cached: int = 0) -> dict:
    """vLLM's ``ResponseUsage`` (per-turn lists empty: one turn, no built-in tools)."""
    return {"input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0,
                                     "input_tokens_per_turn": [],
                                     "cached_tokens_per_turn": []},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": reasoning, "tool_output_tokens": 0,
                                      "output_tokens_per_turn": [],
                                      "tool_output_tokens_per_turn": []},
            "total_tokens": prompt + output}


def response_object(shell: dict, output: list, status: str, usage: dict | None,
                    kv_transfer_params: Any = None) -> dict:
    """The whole response object: ``shell`` with its outcome filled in."""
    out = dict(shell)
    out.update(output=output, status=status, usage=usage, kv_transfer_params=kv_transfer_params)
    if status == "incomplete":
        out["incomplete_details"] = {"reason": "max_output_tokens"}
    return out
