"""/v1/chat/completions request -> ``PreparedRequest`` (one prompt, n samples).

Owns the conversion order of vLLM 0.32: body shape, raw checks, field types, model (404),
serving refusals, then the prompt (§4.2: messages -> chat template with the merged kwargs ->
tokens with ``add_special_tokens`` false by default), truncation and length checks (§4.3), the
``max_completion_tokens``/``max_tokens`` budget (default: the rest of the context) and the
SamplingParams.

Called by: the lead's chat ``resource.py`` (and ``resources.tokenize`` for its chat form).
Runs on: request pool threads (template rendering is Python; tokenization releases the GIL).
"""
from __future__ import annotations

from typing import Any

from errors import InvalidRequest
from resources.chat import types, validate
from resources.common.context import ServingContext
from resources.common.fields import parse_fields, require_object
from resources.common.prepared import PreparedChoice, PreparedRequest, now, response_id
from resources.common.prompts import check_not_empty, make_rule, tokenize_texts
from resources.common.sampling import (build_sampling_params, fan_out, max_tokens_for,
                                       usage_flags)
from text.chat_template import ChatTemplate, ChatTemplateError, parse_messages

NO_TEMPLATE = ("As of transformers v4.44, default chat template is no longer allowed, so you must "
               "provide a chat template if the tokenizer does not define one.")


#: Values that leave a kwarg unset when merged over another (vLLM's ``merge_kwargs``).
_UNSET = (None, "auto")


def _merged(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    return {**defaults, **{k: v for k, v in overrides.items()
                           if not any(v is u or v == u for u in _UNSET)}}


def template_kwargs(ctx: ServingContext, f: dict[str, Any]) -> dict[str, Any]:
    """The chat template kwargs as vLLM 0.32 merges them (§4.2 step 2): the request's
    ``chat_template_kwargs`` under the request's own flags (``add_generation_prompt``,
    ``continue_final_message``, ``documents``, ``reasoning_effort`` and the ``enable_thinking``
    it implies), all of that over the server's ``--default-chat-template-kwargs``; a value of
    None or "auto" never overrides. The same dict reaches the engine with a reasoning parser."""
    request_kwargs = f.get("chat_template_kwargs") or {}
    flags = {"add_generation_prompt": f["add_generation_prompt"],
             "continue_final_message": f["continue_final_message"],
             "documents": f.get("documents"), "reasoning_effort": f.get("reasoning_effort")}
    effort = f.get("reasoning_effort")
    if effort is not None and "enable_thinking" not in request_kwargs:
        flags["enable_thinking"] = effort != "none"
    kwargs = _merged(request_kwargs, flags)
    defaults = ctx.default_chat_template_kwargs
    return _merged(defaults, kwargs) if defaults else kwargs


def tool_dicts(tools: list[dict] | None) -> list[dict] | None:
    """Tools as the template sees them (vLLM passes each tool's model dump)."""
    if tools is None:
        return None
    out = []
    for tool in tools:
        function = tool.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidRequest("Each tool needs a `function` object with a `name`.",
                                 param="tools")
        out.append({"type": tool.get("type", "function"), "function": function})
    return out


def render_prompt(ctx: ServingContext, f: dict[str, Any]) -> tuple[list[dict], str]:
    """(conversation, prompt text) for the validated fields; template errors become 400s."""
    try:
        template = ctx.chat_template
        if f.get("chat_template") is not None:  # only reachable when the server trusts it
            template = ChatTemplate(f["chat_template"], ctx.special_tokens)
        if template is None:
            raise InvalidRequest(NO_TEMPLATE)
        conversation = parse_messages(f["messages"])
        text = template.render_conversation(
            conversation, add_generation_prompt=f["add_generation_prompt"],
            continue_final_message=f["continue_final_message"], tools=tool_dicts(f["tools"]),
            documents=f.get("documents"), extra_kwargs=template_kwargs(ctx, f))
    except ChatTemplateError as exc:
        raise InvalidRequest(str(exc), param=exc.parameter) from None
    return conversation, text


def prepare_chat(body: Any, ctx: ServingContext, *,
                 header_request_id: str | None = None) -> PreparedRequest:
    """Validate and convert a parsed /v1/chat/completions body.

    Raises:
        RequestValidationError: schema/type errors ("Bad Request").
        ModelNotFound: unknown ``model``.
        InvalidRequest: every semantic 400 of text-parity §8.2 that conversion detects.
    """
    body = require_object(body)
    validate.check_raw(body)
    f = parse_fields(body, types.fields(ctx.max_stop_strings))
    lora = ctx.resolve_model(f["model"])
    validate.check_request(f, ctx)

    if f["max_completion_tokens"] is not None:
        requested, param = f["max_completion_tokens"], "max_completion_tokens"
    else:
        requested, param = f["max_tokens"], "max_tokens"
    rule = make_rule(ctx, max_output_tokens=requested or 0, output_param=param,
                     truncate_prompt_tokens=f["truncate_prompt_tokens"],
                     truncation_side=f["truncation_side"],
                     add_special_tokens=f["add_special_tokens"])
    conversation, prompt_text = render_prompt(ctx, f)
    ids = tokenize_texts(ctx, [prompt_text], rule)[0]

    stream = bool(f["stream"])
    include_usage, continuous = usage_flags(f, ctx) if stream else (False, False)
    n = 1 if f["n"] is None else f["n"]
    top = f["top_logprobs"] or 0
    logprobs = top if f["logprobs"] else None
    prompt_logprobs = f["prompt_logprobs"]
    if prompt_logprobs is None and f["echo"]:
        prompt_logprobs = top
    sp = build_sampling_params(f, ctx, n=n, max_tokens=max_tokens_for(ctx, requested, len(ids)),
                               logprobs=logprobs, prompt_logprobs=prompt_logprobs,
                               stream=stream)
    check_not_empty(ids)

    role = ctx.response_role if f["add_generation_prompt"] else f["messages"][-1].get("role")
    echo_content = ""
    if f["echo"] and conversation and conversation[-1].get("role") == role:
        echo_content = conversation[-1].get("content") or ""
    request_id = response_id("chatcmpl-", f["request_id"], header_request_id)
    choices = [PreparedChoice(
        index=i, prompt_index=0, external_req_id=f"{i}_{request_id}" if n > 1 else request_id,
        prompt_token_ids=ids, prompt_text=None, sampling_params=child,
        skip_special_tokens=f["skip_special_tokens"],
        spaces_between_special_tokens=f["spaces_between_special_tokens"],
        stop=list(child.stop or ()), include_stop_str_in_output=f["include_stop_str_in_output"],
        min_tokens=f["min_tokens"], logprobs=logprobs, prompt_logprobs=prompt_logprobs)
        for i, child in enumerate(fan_out(sp, n))]
    return PreparedRequest(
        kind="chat", request_id=request_id, created=now(), model=ctx.response_model(lora),
        stream=stream, choices=choices, include_usage=include_usage, continuous_usage=continuous,
        return_token_ids=bool(f["return_token_ids"]), echo=f["echo"], logprobs=logprobs,
        return_tokens_as_token_ids=bool(f["return_tokens_as_token_ids"]), n=n, num_prompts=1,
        priority=f["priority"], cache_salt=f["cache_salt"], response_role=role,
        echo_content=echo_content if isinstance(echo_content, str) else "",
        return_prompt_text=bool(f["return_prompt_text"]),
        prompt_text=prompt_text if f["return_prompt_text"] else None, lora_request=lora,
        # vLLM: without the reasoning in the answer, a grammar applies from the first token.
        reasoning_ended=None if f["include_reasoning"] else True)
