"""/v1/chat/completions checks, in vLLM 0.32's order and wording (docs/text-parity.md §8.2).

Owns: the message validator that reproduces pydantic's errors for vLLM's union of message types
(a ``content: null`` user message yields the 19 errors of §8.2), the raw-body "before" checks of
ChatCompletionRequest (generation-prompt flags, tools, structured outputs, logprobs, stream
options, response_format), and the serving-layer checks (a tool choice the configured parsers cannot serve, request
chat templates, beam search).

Called by: ``resources.chat.convert`` (and ``resources.chat.types`` for the message validator).
Runs on: request pool threads (pure functions).
"""
from __future__ import annotations

from typing import Any, Protocol

from base.errors import InvalidRequest
from runtime.serving_context import ServingContext
from resources.common.fields import INVALID, add_error, described, with_schema
from resources.common.newer_fields import refuse_unserved
from resources.common.sampling_rules import (Refusable, check_logprob_counts,
                                             check_raw_constraints, refuse_unimplemented)

# vLLM's message union, in order: (class name, required role literal or None for "any string",
# fields in declaration order as (name, rule)). Rules: "text" = str or iterable of parts,
# "text?" the same but optional and nullable, "str" = required str, "str?" = required, nullable
# str, "role" = the role literal, "any" = required, "content?" = optional str | list, "list" =
# harmony list content; the optional ones: "ostr" = str, "ostr?" = str or null, "oiter" = any
# iterable (lazily checked by pydantic, so only its kind), "olist?" = list or null. A field a
# member does not declare is ignored by it (TypedDicts ignore extra keys), so a wrong type there
# only fails when no member accepts the message.
_UNION = (
    ("ChatCompletionDeveloperMessageParam", "developer", (("content", "text"), ("role", "role"),
                                                          ("name", "ostr"))),
    ("ChatCompletionSystemMessageParam", "system", (("content", "text"), ("role", "role"),
                                                    ("name", "ostr"))),
    ("ChatCompletionUserMessageParam", "user", (("content", "text"), ("role", "role"),
                                                ("name", "ostr"))),
    ("ChatCompletionAssistantMessageParam", "assistant", (("role", "role"),
                                                          ("content", "text?"),
                                                          ("name", "ostr"), ("refusal", "ostr?"),
                                                          ("tool_calls", "oiter"))),
    ("ChatCompletionToolMessageParam", "tool", (("content", "text"), ("role", "role"),
                                                ("tool_call_id", "str"))),
    ("ChatCompletionFunctionMessageParam", "function", (("content", "str?"), ("name", "str"),
                                                        ("role", "role"))),
    ("CustomChatCompletionMessageParam", None, (("role", "anystr"), ("content", "content?"),
                                                ("name", "ostr"), ("tool_call_id", "ostr?"),
                                                ("tool_calls", "olist?"), ("reasoning", "ostr?"),
                                                ("tools", "olist?"), ("task", "ostr?"))),
)
#: Rules whose field may be absent.
_OPTIONAL_RULES = frozenset({"text?", "content?", "ostr", "ostr?", "oiter", "olist?"})


#: The member of ``_UNION`` whose role literal is the key.
_BY_ROLE = {role: (name, role, rules) for name, role, rules in _UNION if role is not None}

_PARTS = {"type": "array", "items": {"type": "object"}}
#: The JSON Schema of each content rule of ``_UNION``: (schema, required).
_RULE_SCHEMAS = {
    "text": ({"anyOf": [{"type": "string"}, _PARTS]}, True),
    "text?": ({"anyOf": [{"type": "string"}, _PARTS, {"type": "null"}]}, False),
    "str": ({"type": "string"}, True),
    "anystr": ({"type": "string"}, True),
    "str?": ({"anyOf": [{"type": "string"}, {"type": "null"}]}, True),
    "content?": ({"anyOf": [{"type": "string"}, _PARTS]}, False),
    "ostr": ({"type": "string"}, False),
    "ostr?": ({"anyOf": [{"type": "string"}, {"type": "null"}]}, False),
    "oiter": ({"type": "array", "items": {"type": "object"}}, False),
    "olist?": ({"anyOf": [{"type": "array", "items": {"type": "object"}}, {"type": "null"}]},
               False),
}


def message_schema() -> dict:
    """The JSON Schema of one message: any member of ``_UNION`` (what ``v_message`` accepts)."""
    members = []
    for name, role, rules in _UNION:
        properties, required = {}, []
        for field, rule in rules:
            if rule == "role":
                schema, needed = {"type": "string", "enum": [role]}, True
            else:
                schema, needed = _RULE_SCHEMAS[rule]
            properties[field] = schema
            if needed:
                required.append(field)
        members.append({"type": "object", "title": name, "properties": properties,
                        "required": required})
    return {"anyOf": members}


def _content_errors(rule: str, value: Any, loc: tuple, errors: list) -> None:
    nullable = rule in ("text?", "str?")
    if value is None and nullable:
        return
    if isinstance(value, str):
        return
    if rule == "str?":
        add_error(errors, "string_type", loc, "Input should be a valid string", value)
        return
    if rule in ("text", "text?"):
        if isinstance(value, (list, dict)):
            return  # iterables of parts are checked when the content is parsed
        add_error(errors, "string_type", loc, "Input should be a valid string", value)
        add_error(errors, "iterable_type", loc, "Input should be iterable", value)
        return
    if isinstance(value, list):  # "content?": str | list[parts]
        return
    add_error(errors, "string_type", loc, "Input should be a valid string", value)
    add_error(errors, "list_type", loc, "Input should be a valid list", value)


def _alternative_errors(name: str, role: str | None, rules: tuple, message: dict,
                        loc: tuple) -> list:
    errors: list = []
    here = loc + (name,)
    for field, rule in rules:
        at = here + (field,)
        if field not in message:
            if rule not in _OPTIONAL_RULES:
                add_error(errors, "missing", at, "Field required", message)
            continue
        value = message[field]
        if rule == "role":
            if value != role:
                add_error(errors, "literal_error", at, f"Input should be '{role}'", value,
                          {"expected": f"'{role}'"})
        elif rule in ("str", "anystr", "ostr") or (rule == "ostr?" and value is not None):
            if not isinstance(value, str):
                add_error(errors, "string_type", at, "Input should be a valid string", value)
        elif rule == "oiter":
            if not isinstance(value, (str, list, dict)):  # what JSON gives that iterates
                add_error(errors, "iterable_type", at, "Input should be iterable", value)
        elif rule == "olist?":
            if value is not None and not isinstance(value, list):
                add_error(errors, "list_type", at, "Input should be a valid list", value)
        elif rule != "ostr?":
            _content_errors(rule, value, at, errors)
    return errors


def _v_message(value: Any, loc: tuple, errors: list) -> Any:
    """One chat message: accepted when any member of vLLM's union accepts it; otherwise every
    member's errors, as pydantic reports a failed union."""
    if not isinstance(value, dict):
        for name, _, _ in _UNION:
            add_error(errors, "dict_type", loc + (name,), "Input should be a valid dictionary",
                      value)
        add_error(errors, "model_type", loc + ("Message",), "Input should be a valid dictionary "
                  "or instance of Message", value, {"class_name": "Message"})
        return INVALID
    # PERF: the member named by the message's role is tried first (a union accepts when any
    # member does, so the order matters only for the errors of a message none accepts): a user
    # message built and dropped two members' errors first (~8 us per message).
    role = value.get("role")
    member = _BY_ROLE.get(role) if isinstance(role, str) else None
    if member is not None and not _alternative_errors(*member, value, loc):
        return value
    collected: list = []
    for name, role, rules in _UNION:
        found = _alternative_errors(name, role, rules, value, loc)
        if not found:
            return value
        collected.extend(found)
    # The last member is openai-harmony's Message (author + list content).
    if "author" not in value:
        add_error(collected, "missing", loc + ("Message", "author"), "Field required", value)
    if not isinstance(value.get("content"), list):
        add_error(collected, "list_type", loc + ("Message", "content"),
                  "Input should be a valid list", value.get("content"))
    errors.extend(collected)
    return INVALID


v_message = with_schema(described(_v_message, "message", roles=tuple(r for _, r, _ in _UNION if r)),
                        message_schema())


def _check_tools_raw(body: dict) -> None:
    if body.get("tools") == []:
        raise InvalidRequest("`tools` must not be an empty array. Either provide at least one "
                             "tool or omit the field entirely.", param="tools")
    if "tool_choice" not in body and body.get("tools"):
        body["tool_choice"] = "auto"  # vLLM's default once tools are given
    choice = body.get("tool_choice")
    if choice is None or choice == "none":
        return
    if body.get("tools") is None:
        raise InvalidRequest("When using `tool_choice`, `tools` must be set.",
                             param="tool_choice")
    if choice not in ("auto", "required") and not isinstance(choice, dict):
        raise InvalidRequest(f"Invalid value for `tool_choice`: {choice}! Only named tools, "
                             '"none", "auto" or "required" are supported.', param="tool_choice")
    if isinstance(choice, dict):
        usage = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'
        function = choice.get("function")
        if not isinstance(function, dict):
            raise InvalidRequest(f"Invalid value for `function`: `{function}` in `tool_choice`! "
                                 f"{usage}", param="tool_choice.function")
        if "name" not in function:
            raise InvalidRequest(f"Expected field `name` in `function` in `tool_choice`! {usage}",
                                 param="tool_choice.function.name")
        name = function["name"]
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"Invalid `name` in `function`: `{name}` in `tool_choice`! "
                                 f"{usage}", param="tool_choice.function.name")
        tools = body["tools"] if isinstance(body["tools"], list) else []
        if not any(isinstance(t, dict) and isinstance(t.get("function"), dict)
                   and t["function"].get("name") == name for t in tools):
            raise InvalidRequest("The tool specified in `tool_choice` does not match any of the "
                                 "specified `tools`", param="tool_choice")


def _check_logprobs_raw(body: dict) -> None:
    if body.get("logprob_token_ids") and body.get("use_beam_search"):
        raise InvalidRequest("`logprob_token_ids` is not supported with beam search.",
                             param="logprob_token_ids")
    if body.get("logprob_token_ids") and not body.get("logprobs"):
        raise InvalidRequest("when using `logprob_token_ids`, `logprobs` must be set to true.",
                             param="logprob_token_ids")
    check_logprob_counts(body, ("prompt_logprobs", "top_logprobs"))
    top = body.get("top_logprobs")
    if top is not None:
        if top < 0 and top != -1:
            raise InvalidRequest("`top_logprobs` must be a positive value or -1.",
                                 param="top_logprobs", value=top, show_value=True)
        if (top == -1 or top > 0) and not body.get("logprobs"):
            raise InvalidRequest("when using `top_logprobs`, `logprobs` must be set to true.",
                                 param="top_logprobs")


def check_raw(body: dict) -> None:
    """vLLM's "before" validators of ChatCompletionRequest (last-defined first).

    NOTE: like vLLM, fills in ``tool_choice: "auto"`` on ``body`` when tools come without one.
    """
    if body.get("continue_final_message") and body.get("add_generation_prompt"):
        raise InvalidRequest("Cannot set both `continue_final_message` and "
                             "`add_generation_prompt` to True.")
    refuse_unserved(body, "chat")
    _check_tools_raw(body)
    so = body.get("structured_outputs")
    if isinstance(so, dict):
        count = sum(so.get(k) is not None for k in ("json", "regex", "choice"))
        if count > 1:
            raise InvalidRequest("You can only use one kind of constraints for structured "
                                 "outputs ('json', 'regex' or 'choice').")
        if count and body.get("tool_choice", "none") not in ("none", "auto", "required"):
            raise InvalidRequest("You can only either use constraints for structured outputs "
                                 "or tools, not both.")
    _check_logprobs_raw(body)
    if body.get("stream_options") and not body.get("stream"):
        raise InvalidRequest("Stream options can only be defined when `stream=True`.",
                             param="stream_options")
    check_raw_constraints(body)
    messages = body.get("messages")
    if isinstance(messages, list):  # the deprecated spelling is renamed before validation
        for msg in messages:
            if isinstance(msg, dict) and msg.get("reasoning_content") is not None:
                msg.setdefault("reasoning", msg.pop("reasoning_content"))


class TemplateChoice(Protocol):
    """Where a request may bring its own chat template (chat and /tokenize's chat form)."""

    chat_template: str | None
    chat_template_kwargs: dict[str, Any] | None


class ChatChecked(TemplateChoice, Refusable, Protocol):
    """What ``check_request`` looks at of a chat request (``types.ChatRequest``; this module
    cannot import it: ``types`` takes its message validator from here)."""

    tool_choice: str | dict[str, Any] | None


def check_request(f: ChatChecked, ctx: ServingContext) -> None:
    """Serving-layer refusals before rendering: beam search, unsupported extras, a tool choice
    that needs a tool parser the server does not have, untrusted request chat templates."""
    refuse_unimplemented(f)
    choice = f.tool_choice
    if ctx.output_parsers.tool_parser is None and choice not in (None, "none"):
        if choice == "auto":
            raise InvalidRequest('"auto" tool choice requires --enable-auto-tool-choice and '
                                 "--tool-call-parser to be set")
        desc = (f'function "{choice["function"]["name"]}"' if isinstance(choice, dict)
                else f'"{choice}"')
        raise InvalidRequest(f"tool_choice={desc} requires --tool-call-parser to be set")
    check_template_trust(f, ctx)


def check_template_trust(f: TemplateChoice, ctx: ServingContext) -> None:
    """A request's own chat template (field or kwarg) needs ``--trust-request-chat-template``."""
    kwargs = f.chat_template_kwargs or {}
    if not ctx.trust_request_chat_template and (
            f.chat_template is not None or kwargs.get("chat_template") is not None):
        raise InvalidRequest("Chat template is passed with request, but "
                             "--trust-request-chat-template is not set. Refused request with "
                             "untrusted chat template.")
