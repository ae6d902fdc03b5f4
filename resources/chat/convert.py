"""/v1/chat/completions request -> ``PreparedRequest`` (one prompt, n samples).

Owns the conversion order of vLLM 0.32: body shape, raw checks, field types, model (404),
serving refusals, then the prompt (docs/text-parity.md §4.2: messages -> chat template with the merged kwargs ->
tokens with ``add_special_tokens`` false by default), truncation and length checks (docs/text-parity.md §4.3), the
``max_completion_tokens``/``max_tokens`` budget (default: the rest of the context) and the
SamplingParams.

Called by: ``resources/chat/resource.py`` (and ``resources.tokenize`` for its chat form).
Runs on: request pool threads (template rendering is Python; tokenization releases the GIL).
"""
from __future__ import annotations

from typing import Any, Protocol

from base import jsonio
from base.errors import InvalidRequest
from resources.chat import tool_choice, types, validate
from resources.chat.forwarded_ids import forwarded_prompt_ids
from resources.chat.parsing import ChatParsing
from resources.common.beam import beam_plan
from resources.common.fields import parse_struct, require_object
from streaming.prepared import PreparedChoice, PreparedRequest, now, response_id
from resources.common.prompts import check_length, check_not_empty, make_rule, tokenize_texts
from resources.common.sampling import build_sampling_params, fan_out, max_tokens_for, usage_flags
from runtime.serving_context import ServingContext
from text.chat_messages import ChatTemplateError, parse_messages
from text.chat_template import ChatTemplate, DumpedOnce
from text.thread_memo import ThreadMemo

NO_TEMPLATE = ("As of transformers v4.44, default chat template is no longer allowed, so you must "
               "provide a chat template if the tokenizer does not define one.")


class ChatPrompt(Protocol):
    """What rendering a chat prompt reads of a request: a ``types.ChatRequest``, or /tokenize's
    chat form (``resources.tokenize.types.TokenizeChatRequest``)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    add_generation_prompt: bool
    continue_final_message: bool
    documents: list[dict[str, str]] | None
    reasoning_effort: str | None
    chat_template: str | None
    chat_template_kwargs: dict[str, Any] | None


def _merged(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` over ``defaults``, as vLLM's ``merge_kwargs``: a value of None or "auto"
    leaves the default in place."""
    return {**defaults, **{k: v for k, v in overrides.items()
                           if v is not None and not (v.__class__ is str and v == "auto")}}


def template_kwargs(ctx: ServingContext, f: ChatPrompt) -> dict[str, Any]:
    """The chat template kwargs as vLLM 0.32 merges them (docs/text-parity.md §4.2 step 2): the request's
    ``chat_template_kwargs`` under the request's own flags (``add_generation_prompt``,
    ``continue_final_message``, ``documents``, ``reasoning_effort`` and the ``enable_thinking``
    it implies), all of that over the server's ``--default-chat-template-kwargs``; a value of
    None or "auto" never overrides. The same dict reaches the engine with a reasoning parser."""
    request_kwargs = f.chat_template_kwargs or {}
    flags = {"add_generation_prompt": f.add_generation_prompt,
             "continue_final_message": f.continue_final_message,
             "documents": f.documents, "reasoning_effort": f.reasoning_effort}
    effort = f.reasoning_effort
    if effort is not None and "enable_thinking" not in request_kwargs:
        flags["enable_thinking"] = effort != "none"
    kwargs = _merged(request_kwargs, flags)
    defaults = ctx.default_chat_template_kwargs
    return _merged(defaults, kwargs) if defaults else kwargs


#: The template's tools per request JSON, on each rendering thread. 32 tool sets: an agent
#: deployment has a few; 32 sets of 50 large tools are still only ~6 MB per thread.
_TOOL_DICTS = ThreadMemo(limit=32)


def tool_dicts(tools: list[dict] | None) -> list[dict] | None:
    """Tools as the template sees them: vLLM's model dump of each tool (``description`` and
    ``parameters`` always present, ``strict``/``defer_loading`` only when set, unknown keys
    dropped), so templates render the same prompt. The result is shared: read it only.

    PERF: an agent sends the same tools with every turn; kept per thread by their JSON, the
    dump and the template's ``tojson`` of each tool (``DumpedOnce``) are made once (the
    bench's one tool: ~12 us of a chat request's ~120 us of conversion)."""
    if tools is None:
        return None
    try:
        key = jsonio.dumps(tools)
    except TypeError:
        return _dumped_tools(tools)
    return _TOOL_DICTS.get_or_make(key, lambda: _dumped_tools(tools))


def _dumped_tools(tools: list[dict]) -> list[dict]:
    out = []
    for tool in tools:
        function = tool.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidRequest("Each tool needs a `function` object with a `name`.",
                                 param="tools")
        dumped = {"name": function["name"], "description": function.get("description"),
                  "parameters": function.get("parameters")}
        defer = function.get("defer_loading", tool.get("defer_loading"))
        for key, value in (("strict", function.get("strict")), ("defer_loading", defer)):
            if value is not None:
                dumped[key] = value
        item = DumpedOnce(type=tool.get("type", "function"), function=dumped)
        if tool.get("defer_loading") is not None:
            item["defer_loading"] = tool["defer_loading"]
        out.append(item)
    return out


def chat_parsing(ctx: ServingContext, f: types.ChatRequest,
                 kwargs: dict[str, Any]) -> ChatParsing | None:
    """What the output parsers do for this request; None when the server has none. Also
    applies their request changes to ``f`` (vLLM's ``adjust_request``): marker tokens kept in
    the text, and "required"/named choices constrained to the calls' JSON schema. ``kwargs``:
    the request's ``template_kwargs``."""
    parsers = ctx.output_parsers
    if not parsers.active:
        return None
    choice = f.tool_choice
    named = choice["function"]["name"] if isinstance(choice, dict) else None
    setup = ChatParsing(
        parsers=parsers, tools=f.tools, tool_choice="named" if named else (choice or "none"),
        named=named, parallel_tool_calls=f.parallel_tool_calls,
        include_reasoning=f.include_reasoning, template_kwargs=kwargs,
        eos_ids=frozenset([ctx.tokenizer.eos_token_id, *ctx.generation_eos_ids]))
    if parsers.reasoning_parser is not None and parsers.reasoning_parser.keep_special_tokens:
        f.skip_special_tokens = False
    tool = parsers.tool_parser
    if tool is not None and f.tools and setup.tool_choice != "none":
        if tool.keep_special_tokens:
            f.skip_special_tokens = False
        if setup.forced_json:
            f.structured_outputs = {"json": tool_choice.json_schema(
                f.tools, named, f.parallel_tool_calls)}
            f.response_format = None
    return setup


def engine_reasoning(ctx: ServingContext, f: types.ChatRequest, prompt_ids: list[int],
                     template: dict[str, Any]) -> tuple[bool | None, dict | None]:
    """The ADD's ``reasoning_ended`` and ``reasoning_parser_kwargs`` as vLLM 0.32's chat frontend
    sets them (a structured-output grammar applies once the thought is over): True when the
    answer leaves the reasoning out; with a reasoning parser, whether the prompt already closed
    the thought, and the chat template kwargs for the engine's own reasoning parser; otherwise
    None (the engine decides). ``template``: the request's ``template_kwargs``."""
    parser = ctx.output_parsers.reasoning_parser
    kwargs = {"chat_template_kwargs": template} if parser is not None else None
    if not f.include_reasoning:
        return True, kwargs
    if parser is None:
        return None, None
    instance = parser(ctx.output_parsers.vocab, kwargs["chat_template_kwargs"])
    return instance.prompt_ends_reasoning(prompt_ids), kwargs


def render_prompt(ctx: ServingContext, f: ChatPrompt,
                  kwargs: dict[str, Any] | None = None) -> tuple[list[dict], str]:
    """(conversation, prompt text) for the validated fields; template errors become 400s.
    ``kwargs``: the request's ``template_kwargs`` when the caller has them already."""
    try:
        template = ctx.chat_template
        if f.chat_template is not None:  # only reachable when the server trusts it
            template = ChatTemplate(f.chat_template, ctx.special_tokens)
        if template is None:
            raise InvalidRequest(NO_TEMPLATE)
        conversation = parse_messages(f.messages)
        tools = tool_dicts(f.tools)
        # /tokenize's chat form has no tool_choice: it renders its tools regardless.
        if ctx.exclude_tools_when_tool_choice_none and getattr(f, "tool_choice", None) == "none":
            tools = None
        text = template.render_conversation(
            conversation, add_generation_prompt=f.add_generation_prompt,
            continue_final_message=f.continue_final_message, tools=tools,
            documents=f.documents,
            extra_kwargs=template_kwargs(ctx, f) if kwargs is None else kwargs)
    except ChatTemplateError as exc:
        raise InvalidRequest(str(exc), param=exc.parameter) from None
    return conversation, text


def _requested_output(f: types.ChatRequest) -> tuple[int | None, str]:
    """(the requested output budget, the field that asked for it)."""
    if f.max_completion_tokens is not None:
        return f.max_completion_tokens, "max_completion_tokens"
    return f.max_tokens, "max_tokens"


def parse_chat(body: Any, ctx: ServingContext) -> types.ChatRequest:
    """A parsed /v1/chat/completions body checked and typed (vLLM's "before" checks, then the
    field types). Other APIs that convert to chat (``resources.messages``) feed their converted
    body through here too.

    Raises:
        RequestValidationError: schema/type errors ("Bad Request").
        InvalidRequest: the raw checks' 400s.
    """
    body = require_object(body)
    validate.check_raw(body)
    return parse_struct(body, types.fields(ctx.max_stop_strings), types.ChatRequest)


def prepare_chat(body: Any, ctx: ServingContext, *,
                 header_request_id: str | None = None) -> PreparedRequest:
    """Validate and convert a parsed /v1/chat/completions body (``parse_chat``, then
    ``prepare_parsed_chat``)."""
    return prepare_parsed_chat(parse_chat(body, ctx), ctx, header_request_id=header_request_id)


def chat_prompt_ids(f: types.ChatRequest, ctx: ServingContext) -> list[int]:
    """The prompt token ids a parsed chat request renders to (the model checked, the serving
    refusals and the length rules applied), without building an engine request."""
    ctx.resolve_model(f.model)
    validate.check_request(f, ctx)
    rule = _length_rule(ctx, f)[0]
    prompt_text = render_prompt(ctx, f)[1]
    return list(tokenize_texts(ctx, [prompt_text], rule)[0])


def _length_rule(ctx: ServingContext, f: types.ChatRequest) -> tuple[Any, int | None]:
    """The prompt-length rule of a chat request, and the output length it asked for."""
    requested, param = _requested_output(f)
    rule = make_rule(ctx, max_output_tokens=requested or 0, output_param=param,
                     truncate_prompt_tokens=f.truncate_prompt_tokens,
                     truncation_side=f.truncation_side,
                     add_special_tokens=f.add_special_tokens)
    return rule, requested


def _prompt(ctx: ServingContext, f: types.ChatRequest, kwargs: dict[str, Any],
            rule: Any) -> tuple[list[dict], str | None, list[int]]:
    """(conversation, prompt text, prompt ids): the rendered and tokenized messages, or the ids
    a P/D decode stage was forwarded (docs/parity.md §7)."""
    forwarded = forwarded_prompt_ids(ctx, f)
    if forwarded is not None:
        return [], None, check_length(forwarded, rule)
    conversation, prompt_text = render_prompt(ctx, f, kwargs)
    return conversation, prompt_text, tokenize_texts(ctx, [prompt_text], rule)[0]


def prepare_parsed_chat(f: types.ChatRequest, ctx: ServingContext, *,
                        header_request_id: str | None = None) -> PreparedRequest:
    """Convert a parsed chat request (``parse_chat``) into engine requests.

    Raises:
        ModelNotFound: unknown ``model``.
        InvalidRequest: every semantic 400 of docs/text-parity.md §8.2 that conversion detects.
    """
    lora = ctx.resolve_model(f.model)
    validate.check_request(f, ctx)

    rule, requested = _length_rule(ctx, f)
    kwargs = template_kwargs(ctx, f)
    conversation, prompt_text, ids = _prompt(ctx, f, kwargs, rule)
    parsing = chat_parsing(ctx, f, kwargs)
    reasoning_ended, reasoning_kwargs = engine_reasoning(ctx, f, ids, kwargs)

    stream = bool(f.stream)
    include_usage, continuous = usage_flags(f, ctx) if stream else (False, False)
    n = 1 if f.n is None else f.n
    top = f.top_logprobs or 0
    logprobs = top if f.logprobs else None
    if f.use_beam_search:
        return _beam_chat(f, ctx, ids, requested, logprobs, conversation, prompt_text,
                          header_request_id, lora, parsing, (stream, include_usage, continuous))
    prompt_logprobs = f.prompt_logprobs
    if prompt_logprobs is None and f.echo:
        prompt_logprobs = top
    sp = build_sampling_params(f, ctx, n=n, max_tokens=max_tokens_for(ctx, requested, len(ids)),
                               logprobs=logprobs, prompt_logprobs=prompt_logprobs,
                               stream=stream)
    check_not_empty(ids)

    role, echo_content, request_id = _role_echo_id(f, ctx, conversation, header_request_id)
    choices = [PreparedChoice(
        index=i, prompt_index=0, external_req_id=f"{i}_{request_id}" if n > 1 else request_id,
        prompt_token_ids=ids, prompt_text=None, sampling_params=child)
        for i, child in enumerate(fan_out(sp, n))]
    return PreparedRequest(
        kind="chat", request_id=request_id, created=now(), model=ctx.response_model(lora),
        stream=stream, choices=choices, include_usage=include_usage, continuous_usage=continuous,
        return_token_ids=bool(f.return_token_ids), echo=f.echo, logprobs=logprobs,
        return_tokens_as_token_ids=ctx.tokens_as_ids(f.return_tokens_as_token_ids), n=n,
        num_prompts=1,
        priority=f.priority, cache_salt=f.cache_salt, response_role=role,
        echo_content=echo_content if isinstance(echo_content, str) else "",
        prompt_text=prompt_text if f.return_prompt_text else None, lora_request=lora,
        chat_parsing=parsing, reasoning_ended=reasoning_ended,
        reasoning_parser_kwargs=reasoning_kwargs)


def _role_echo_id(f: types.ChatRequest, ctx: ServingContext, conversation: list[dict],
                  header_request_id: str | None) -> tuple[str, Any, str]:
    """The response's role, the content ``echo`` repeats (the last message's, when it has that
    role) and the response id: the same for a sampled and a beam-search chat."""
    role = ctx.response_role if f.add_generation_prompt else f.messages[-1].get("role")
    echo_content = ""
    if f.echo and conversation and conversation[-1].get("role") == role:
        echo_content = conversation[-1].get("content") or ""
    return role, echo_content, response_id("chatcmpl-", f.request_id, header_request_id)


def _beam_chat(f: types.ChatRequest, ctx: ServingContext, ids: list[int], requested: int | None,
               logprobs: int | None, conversation: list[dict], prompt_text: str | None,
               header_request_id: str | None, lora: Any, parsing: Any,
               streaming: tuple[bool, bool, bool]) -> PreparedRequest:
    """A beam-search chat completion (``resources.common.beam``): one choice carrying the
    prompt; the sampling fields and the engine's reasoning fields do not apply (vLLM builds
    no SamplingParams for it); the output parsers still read each beam's text. ``streaming``:
    (stream, include_usage, continuous usage); a stream sends the finished beams at once."""
    stream, include_usage, continuous = streaming
    n = 1 if f.n is None else f.n
    plan = beam_plan(f, ctx, n, [max_tokens_for(ctx, requested, len(ids))])
    check_not_empty(ids)
    role, echo_content, request_id = _role_echo_id(f, ctx, conversation, header_request_id)
    choice = PreparedChoice(index=0, prompt_index=0, external_req_id=request_id,
                            prompt_token_ids=ids, prompt_text=None,
                            sampling_params=plan.step_params)
    return PreparedRequest(
        kind="chat", request_id=request_id, created=now(), model=ctx.response_model(lora),
        stream=stream, choices=[choice], include_usage=include_usage,
        continuous_usage=continuous, return_token_ids=bool(f.return_token_ids),
        echo=f.echo, logprobs=logprobs,
        return_tokens_as_token_ids=ctx.tokens_as_ids(f.return_tokens_as_token_ids), n=n,
        num_prompts=1, cache_salt=f.cache_salt, response_role=role,
        echo_content=echo_content if isinstance(echo_content, str) else "",
        prompt_text=prompt_text if f.return_prompt_text else None, lora_request=lora,
        chat_parsing=parsing, beam=plan)
