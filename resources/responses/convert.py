"""/v1/responses request -> ``ResponsesPrepared``: a chat request run through the chat pipeline.

The request is rewritten as a /v1/chat/completions body (messages from ``instructions`` and
``input``, function tools, ``tool_choice``, ``max_output_tokens`` as ``max_tokens``,
``text.format`` as ``response_format``, ``reasoning.effort`` as ``reasoning_effort``, vLLM's
sampling and extra fields as they are) and prepared by ``resources.chat.convert.prepare_chat``:
one template, tool and reasoning pipeline for both APIs. What the response object echoes is
kept beside it (``shell``).

Called by: ``resources/responses/resource.py``.
Runs on: request pool threads.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from base.errors import InvalidRequest
from resources.chat.convert import prepare_chat
from resources.common.fields import add_error, require_object, validation_error
from streaming.prepared import PreparedRequest, random_request_id
from resources.responses import items as conv
from resources.responses.shell import response_shell
from runtime.serving_context import ServingContext

#: Fields passed to the chat pipeline unchanged (vLLM's sampling and extra fields).
PASSED = ("model", "stream", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
          "presence_penalty", "frequency_penalty", "seed", "stop", "stop_token_ids",
          "ignore_eos", "logit_bias", "vllm_xargs", "kv_transfer_params", "skip_special_tokens",
          "include_stop_str_in_output", "priority", "cache_salt", "structured_outputs",
          "session_id", "chat_template_kwargs", "media_io_kwargs", "mm_processor_kwargs",
          "parallel_tool_calls", "include_reasoning", "user", "watermarking")

#: Accepted, echoed or ignored as vLLM does (no effect on generation).
ECHOED = ("instructions", "metadata", "service_tier", "max_tool_calls", "top_logprobs",
          "prompt_cache_key", "previous_response_id", "store", "mm_payload", "return_mm_kwargs")

#: Refused: greenfront does not serve these (docs/responses.md §Not built).
REFUSED = {
    "include": "`include` is not supported.",
    "previous_input_messages": "`previous_input_messages` (Harmony models) is not supported.",
    "enable_response_messages": "`enable_response_messages` is not supported.",
    "ec_transfer_params": "`ec_transfer_params` is not supported.",
}


@dataclasses.dataclass
class ResponsesPrepared(PreparedRequest):
    """A chat ``PreparedRequest`` plus the response object's echoed fields (``shell``)."""

    shell: dict = dataclasses.field(default_factory=dict)
    #: the chat messages this request rendered (what a later ``previous_response_id`` replays)
    messages: list = dataclasses.field(default_factory=list)
    #: HTTP hub: stores the finished response object (None: not stored)
    save: Callable[[dict], None] | None = None


def _check_refused(body: dict) -> None:
    if body.get("prompt") is not None:
        raise InvalidRequest("prompt template is not supported", param="prompt")
    if body.get("background"):
        if body.get("store", True) is False:
            raise InvalidRequest("background can only be used when `store` is true",
                                 param="background")
        raise InvalidRequest("Background responses are not supported.", param="background")
    for name, message in REFUSED.items():
        if body.get(name):
            raise InvalidRequest(message, param=name)


def _tool_choice(body: dict, tools: list) -> Any:
    """The effective ``tool_choice`` (vLLM's check_tool_usage): "none" without tools."""
    choice = body.get("tool_choice", "auto")
    named = isinstance(choice, dict) and choice.get("type") in ("function", "custom")
    if not tools:
        if choice in ("auto", "none", None):
            return "none"
        if choice == "required":
            raise InvalidRequest("Tool choice 'required' must be specified with 'tools' "
                                 "parameter.", param="tool_choice")
        if named:
            raise InvalidRequest("Tool choice 'function' not found in 'tools' parameter.",
                                 param="tool_choice")
    elif named and not any(t.get("name") == choice.get("name") for t in tools):
        raise InvalidRequest("Tool choice 'function' not found in 'tools' parameter.",
                             param="tool_choice")
    return choice


def _chat_tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict):
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def _response_format(body: dict) -> dict | None:
    """``text.format`` as chat's ``response_format`` (None: plain text)."""
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict):
        return None
    if body.get("structured_outputs") is not None:
        raise InvalidRequest("Cannot specify both structured_outputs and text.format",
                             param="structured_outputs")
    kind = fmt.get("type")
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema" and fmt.get("schema") is not None:
        schema = {k: fmt[k] for k in ("name", "description", "schema", "strict") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    return None


def chat_body(body: dict, tools: list, tool_choice: Any, history: list[dict]) -> dict:
    """The /v1/chat/completions body that generates this response. ``history``: the messages
    of ``previous_response_id``'s chain (empty without one)."""
    messages: list[dict] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    messages.extend(history)
    source = body.get("input")
    if isinstance(source, str):
        messages.append({"role": "user", "content": source})
    elif isinstance(source, list):
        messages.extend(conv.input_messages(source))
    else:
        raise InvalidRequest("`input` must be a string or a list of items.", param="input")
    chat: dict[str, Any] = {k: body[k] for k in PASSED if k in body}
    continued = conv.continues_last(source)
    chat.update(messages=messages, tools=conv.chat_tools(tools) if tools else None,
                tool_choice=_chat_tool_choice(tool_choice),
                max_tokens=body.get("max_output_tokens"),
                add_generation_prompt=not continued, continue_final_message=continued,
                # vLLM tokenizes a Responses prompt with the tokenizer's special tokens (its
                # TokenizeParams default), unlike chat's default.
                add_special_tokens=True)
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort") is not None:
        chat["reasoning_effort"] = reasoning["effort"]
    if body.get("truncation") == "auto":
        chat["truncate_prompt_tokens"] = -1
    response_format = _response_format(body)
    if response_format is not None:
        chat["response_format"] = response_format
    return chat


def _check_input(body: dict, tools: list) -> None:
    """``input``'s type errors as vLLM's pydantic model reports them (the body as its
    validators left it: ``tool_choice`` set to "none" without tools)."""
    errors: list = []
    source = body.get("input")
    if "input" not in body:
        seen = body
        if not tools and body.get("tool_choice", "auto") in ("auto", "none"):
            seen = {**body, "tool_choice": "none"}
        add_error(errors, "missing", ("body", "input"), "Field required", seen)
    elif not isinstance(source, (str, list)):
        add_error(errors, "string_type", ("body", "input"), "Input should be a valid string",
                  source)
        add_error(errors, "list_type", ("body", "input"), "Input should be a valid list", source)
    if errors:
        raise validation_error(errors)


def _renamed(exc: InvalidRequest) -> InvalidRequest:
    """A chat-pipeline error in the Responses API's words: the output budget that does not fit
    the context is ``max_output_tokens`` (vLLM's own SamplingParams checks still say
    ``max_tokens``)."""
    if exc.param != "max_tokens" or "max_model_len" not in exc.message:
        return exc
    out = InvalidRequest(exc.message.replace("max_tokens", "max_output_tokens"))
    out.param = "max_output_tokens"
    return out


def _history(body: dict, history: Callable[[str], list[dict]] | None) -> list[dict]:
    previous = body.get("previous_response_id")
    if previous is None:
        return []
    if not isinstance(previous, str):
        raise InvalidRequest("`previous_response_id` must be a string.",
                             param="previous_response_id")
    if history is None:
        from resources.responses.stored import ResponseNotFound
        raise ResponseNotFound(previous)
    return history(previous)


def prepare_responses(body: Any, ctx: ServingContext, *, header_request_id: str | None = None,
                      history: Callable[[str], list[dict]] | None = None) -> ResponsesPrepared:
    """Validate and convert a parsed /v1/responses body. ``history(id)``: the replayed turns of
    a ``previous_response_id`` (``resources.responses.stored``; without it such an id is
    unknown).

    Raises:
        ApiError: every 4xx of the chat pipeline, and the Responses API's own.
    """
    body = require_object(body)
    # vLLM's order: its model's "before" validators (background, prompt, tool usage), then
    # the fields' types.
    _check_refused(body)
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise InvalidRequest("`tools` must be a list.", param="tools")
    tool_choice = _tool_choice(body, tools)
    _check_input(body, tools)
    chat = chat_body(body, tools, tool_choice, _history(body, history))
    try:
        prepared = prepare_chat(chat, ctx)
    except InvalidRequest as exc:
        raise _renamed(exc) from None
    rid = body.get("request_id") or f"resp_{random_request_id()}"
    for choice in prepared.choices:
        choice.external_req_id = f"{rid}_0"  # vLLM's first (only) sub-request of a response
    prepared.request_id = rid
    fields = {f.name: getattr(prepared, f.name) for f in dataclasses.fields(PreparedRequest)}
    shell = response_shell(body, prepared, tools, tool_choice)
    return ResponsesPrepared(**fields, shell=shell, messages=chat["messages"])
