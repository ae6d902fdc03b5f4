"""prepare_chat: template rendering, tokenization without added BOS, max_tokens defaults, echo,
tools, and the conversion-time errors of docs/text-parity.md §8.2 for chat."""
from __future__ import annotations

import dataclasses

import pytest

from resources.chat import prepare_chat
from tests.support.errors import raised_text

HI = [{"role": "user", "content": "Hi"}]


def prep(ctx, messages=HI, **body):
    return prepare_chat({"model": "tiny", "messages": messages, **body}, ctx)


def ids(ctx, messages=HI, **body):
    return prep(ctx, messages, **body).choices[0].prompt_token_ids


def error_body(ctx, body) -> tuple[int, str]:
    return raised_text(prepare_chat, body, ctx)


def test_template_and_tokenization(ctx):
    assert ids(ctx) == [1, 3, 37133, 4]
    assert ids(ctx, add_special_tokens=True) == [1, 1, 3, 37133, 4]
    # NOTE: docs/text-parity.md §4.2 shows untyped parts ({"text": "Hi"}) working in vLLM;
    # text.chat_template refuses them ("Missing 'type' field"), so typed parts here.
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hi"}, "there"]}]
    assert ids(ctx, parts) == [1, 3, 37133, 1010, 33211, 4]
    assert ids(ctx, [{"role": "wizard", "content": "x"}]) == [1]
    folded = [{"role": "system", "content": "S"}, {"role": "user", "content": "a[/INST]b</s>"},
              {"role": "assistant", "content": "A"}, {"role": "user", "content": "U"}]
    assert ids(ctx, folded) == [1, 3, 1097, 4, 1098, 2, 4, 1065, 2, 3, 1083, 1267, 1085, 4]
    convo = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert ids(ctx, convo, add_generation_prompt=False, continue_final_message=True) == [
        1, 3, 37133, 4, 22177]
    letters = [{"role": "user", "content": "a b c d e f g"}]
    assert ids(ctx, letters, truncate_prompt_tokens=5) == [1266, 1324, 1284, 1343, 4]


def test_max_tokens_defaults_and_precedence(ctx):
    assert prep(ctx).choices[0].sampling_params.max_tokens == 2048 - 4
    assert prep(ctx, max_tokens=7).choices[0].sampling_params.max_tokens == 7
    both = prep(ctx, max_tokens=7, max_completion_tokens=5)
    assert both.choices[0].sampling_params.max_tokens == 5
    assert both.choices[0].sampling_params.temperature == 1.0  # generation_config default
    status, body = error_body(ctx, {"messages": HI, "max_completion_tokens": 4000})
    assert status == 400 and ("max_completion_tokens=4000 cannot be greater than max_model_len="
                              "2048. Please request fewer output tokens. (parameter="
                              "max_completion_tokens, value=4000)") in body


def test_roles_echo_and_logprobs(ctx):
    p = prep(ctx, echo=True)
    assert p.response_role == "assistant" and p.echo_content == ""
    assert p.choices[0].prompt_logprobs == 0  # echo asks for prompt logprobs (top_logprobs)
    convo = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    cont = prep(ctx, convo, add_generation_prompt=False, continue_final_message=True, echo=True)
    assert cont.response_role == "assistant" and cont.echo_content == "Hello"
    lp = prep(ctx, logprobs=True, top_logprobs=3)
    assert lp.logprobs == 3 and lp.choices[0].sampling_params.logprobs == 3
    assert prep(ctx, logprobs=True).logprobs == 0
    custom = dataclasses.replace(ctx, response_role="bot")
    assert prepare_chat({"messages": HI}, custom).response_role == "bot"


def test_tools_and_kwargs(ctx):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert ids(ctx, tools=tools, tool_choice="none") == [1, 3, 37133, 4]
    p = prep(ctx, reasoning_effort="low", chat_template_kwargs={"foo": 1}, return_prompt_text=True)
    assert p.prompt_text == "<s>[INST]Hi[/INST]"
    status, body = error_body(ctx, {"messages": HI, "chat_template_kwargs": {"tokenize": True}})
    assert status == 400 and "Found unexpected chat template kwargs from request: " in body
    trusted = dataclasses.replace(ctx, trust_request_chat_template=True)
    assert prepare_chat({"messages": HI, "chat_template": "{{ bos_token }}X"}, trusted
                        ).choices[0].prompt_token_ids == [1, 1088]


def test_n_and_request_id(ctx):
    p = prepare_chat({"messages": HI, "n": 2, "seed": 5}, ctx, header_request_id="h")
    assert p.request_id == "chatcmpl-h" and [c.index for c in p.choices] == [0, 1]
    assert [c.sampling_params.seed for c in p.choices] == [5, 6]
    assert [c.external_req_id for c in p.choices] == ["0_chatcmpl-h", "1_chatcmpl-h"]


V = "1 validation error:\\n  "
CASES = [
    ({"model": "nope", "messages": HI}, 404, '{"error":{"message":"The model `nope` does not '
     'exist. Valid aliases: tiny.","type":"NotFoundError","param":"model","code":404}}'),
    ({"messages": HI, "temperature": -0.5}, 400, '{"error":{"message":"temperature must be '
     'non-negative, got -0.5. (parameter=temperature, value=-0.5)","type":"BadRequestError",'
     '"param":"temperature","code":400}}'),
    ({"model": "tiny", "messages": "hi"}, 400, '{"error":{"message":"' + V + "{'type': "
     "'list_type', 'loc': 'body.messages', 'msg': 'Input should be a valid list', 'input': 'hi'}"
     '","type":"Bad Request","param":"body.messages","code":400}}'),
    ({"model": "tiny", "max_tokens": 5}, 400, '{"error":{"message":"' + V + "{'type': 'missing',"
     " 'loc': 'body.messages', 'msg': 'Field required', 'input': '<dict of 2 items>'}\",\"type\":"
     "\"Bad Request\",\"param\":\"body.messages\",\"code\":400}}"),
    ({"messages": []}, 400, '{"error":{"message":"Cannot apply chat template to an empty '
     'conversation. Provide at least one message.","type":"BadRequestError","param":null,'
     '"code":400}}'),
    ({"messages": HI, "chat_template": "x"}, 400, '{"error":{"message":"Chat template is passed '
     'with request, but --trust-request-chat-template is not set. Refused request with '
     'untrusted chat template.","type":"BadRequestError","param":null,"code":400}}'),
    ({"messages": HI, "tools": [{"type": "function", "function": {"name": "f"}}]}, 400,
     '{"error":{"message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and '
     '--tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}'),
    ({"messages": HI, "continue_final_message": True}, 400, '{"error":{"message":'
     '"continue_final_message and add_generation_prompt are not compatible. Use '
     'continue_final_message when you want the model to continue the final message, and '
     'add_generation_prompt when you want to add a header that will prompt it to start a new '
     'assistant message instead.","type":"BadRequestError","param":null,"code":400}}'),
    ({"messages": HI, "continue_final_message": True, "add_generation_prompt": True}, 400,
     '{"error":{"message":"Cannot set both `continue_final_message` and `add_generation_prompt` '
     'to True.","type":"BadRequestError","param":null,"code":400}}'),
    ({"messages": HI, "stream_options": {}, "stream": False, "n": 1}, 400, None),
]


@pytest.mark.parametrize("body,status,expected", CASES[:-1])
def test_errors_verbatim(ctx, body, status, expected):
    assert error_body(ctx, body) == (status, expected)


def test_user_content_null_is_19_pydantic_errors(ctx):
    status, body = error_body(ctx, {"model": "tiny",
                                    "messages": [{"role": "user", "content": None}]})
    assert status == 400
    first = ("{'type': 'string_type', 'loc': 'body.messages.0.ChatCompletionDeveloperMessageParam"
             ".content', 'msg': 'Input should be a valid string', 'input': 'None'}")
    assert body.startswith('{"error":{"message":"19 validation errors:\\n  ' + first)
    assert body.endswith('\\n  ...and 9 more errors","type":"Bad Request","param":'
                         '"body.messages.0.ChatCompletionDeveloperMessageParam.content",'
                         '"code":400}}')
    # The ten shown, as vLLM 0.32's pydantic models report them.
    shown = [line.split("'")[3] + " " + line.split("'")[7]
             for line in body.split("\\n  ")[1:11]]
    assert shown == [
        "string_type body.messages.0.ChatCompletionDeveloperMessageParam.content",
        "iterable_type body.messages.0.ChatCompletionDeveloperMessageParam.content",
        "literal_error body.messages.0.ChatCompletionDeveloperMessageParam.role",
        "string_type body.messages.0.ChatCompletionSystemMessageParam.content",
        "iterable_type body.messages.0.ChatCompletionSystemMessageParam.content",
        "literal_error body.messages.0.ChatCompletionSystemMessageParam.role",
        "string_type body.messages.0.ChatCompletionUserMessageParam.content",
        "iterable_type body.messages.0.ChatCompletionUserMessageParam.content",
        "literal_error body.messages.0.ChatCompletionAssistantMessageParam.role",
        "string_type body.messages.0.ChatCompletionToolMessageParam.content",
    ]
    assert ("{'type': 'literal_error', 'loc': 'body.messages.0.ChatCompletionDeveloperMessageParam"
            ".role', 'msg': \\\"Input should be 'developer'\\\", 'input': 'user', 'ctx': "
            "{'expected': \\\"'developer'\\\"}}") in body


def test_other_message_shapes(ctx):
    assert error_body(ctx, {"messages": ["hi"]})[1].startswith(
        '{"error":{"message":"8 validation errors:')
    assert error_body(ctx, {"messages": [{"content": "hi"}]})[1].startswith(
        '{"error":{"message":"11 validation errors:')
    assert ids(ctx, [{"role": "user"}, {"role": "user", "content": "Hi"}]) is not None
    assert ids(ctx, [{"role": "assistant", "content": None}, *HI]) is not None


def test_tool_choice_refusals(ctx):
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert "tool_choice=\\\"required\\\" requires --tool-call-parser to be set" in error_body(
        ctx, {"messages": HI, "tools": tools, "tool_choice": "required"})[1]
    named = {"type": "function", "function": {"name": "f"}}
    assert 'tool_choice=function \\"f\\" requires --tool-call-parser' in error_body(
        ctx, {"messages": HI, "tools": tools, "tool_choice": named})[1]
    assert "`tools` must not be an empty array" in error_body(ctx, {"messages": HI,
                                                                    "tools": []})[1]
    assert "When using `tool_choice`, `tools` must be set." in error_body(
        ctx, {"messages": HI, "tool_choice": "auto"})[1]


def test_logprob_flag_rules(ctx):
    assert "when using `top_logprobs`, `logprobs` must be set to true." in error_body(
        ctx, {"messages": HI, "top_logprobs": 2})[1]
    assert "`prompt_logprobs` are not available when `stream=True`." in error_body(
        ctx, {"messages": HI, "prompt_logprobs": 1, "stream": True})[1]


def test_tools_rendered_from_each_requests_own_json(ctx):
    """The template's tools are kept per thread by their JSON (``tool_dicts``): a repeated
    request renders the same prompt, and a change to any part of the tools is rendered."""
    template = "{% for t in tools %}{{ t | tojson }};{% endfor %}"
    trusted = dataclasses.replace(ctx, trust_request_chat_template=True)

    def text(tools):
        return prepare_chat({"messages": HI, "tools": tools, "tool_choice": "none",
                             "chat_template": template, "return_prompt_text": True},
                            trusted).prompt_text

    def tool(name, parameters):
        return [{"type": "function", "function": {"name": name, "parameters": parameters}}]

    first = text(tool("f", {"type": "object"}))
    assert first == ('{"type": "function", "function": {"name": "f", "description": null, '
                     '"parameters": {"type": "object"}}};')
    assert text(tool("f", {"type": "object"})) == first
    assert text(tool("g", {"type": "object"})) == first.replace('"f"', '"g"')
    assert text(tool("f", {"type": "array"})) == first.replace('"object"', '"array"')
    assert text(tool("f", {"type": "object"}) + tool("h", {})).startswith(first)
    assert error_body(ctx, {"messages": HI, "tools": [{"type": "function"}]})[0] == 400


def test_forwarded_prompt_ids_are_the_prompt_and_leave_kv_transfer_params(ctx):
    p = prep(ctx, kv_transfer_params={"prompt_token_ids": [7, 8, 9], "remote_host": "h"})
    assert p.choices[0].prompt_token_ids == [7, 8, 9]
    extra = p.choices[0].sampling_params.extra_args
    assert extra["kv_transfer_params"] == {"remote_host": "h"}
    only = prep(ctx, kv_transfer_params={"prompt_token_ids": [7, 8, 9]})
    assert "kv_transfer_params" not in (only.choices[0].sampling_params.extra_args or {})
    # echo renders the messages: the ids are dropped, not used
    assert prep(ctx, echo=True, kv_transfer_params={"prompt_token_ids": [7]}).choices[
        0].prompt_token_ids == [1, 3, 37133, 4]
    for bad in ([], [-1], "x", [True], [1.5]):
        status, text = error_body(ctx, {"model": "tiny", "messages": HI,
                                        "kv_transfer_params": {"prompt_token_ids": bad}})
        assert status == 400 and "must be a non-empty list of non-negative integers" in text
    status, text = error_body(ctx, {"model": "tiny", "messages": HI,
                                    "kv_transfer_params": {"prompt_token_ids": [10 ** 8]}})
    assert status == 400 and "Token id 100000000 is out of vocabulary" in text
