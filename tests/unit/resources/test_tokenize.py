"""/tokenize and /detokenize bodies of docs/text-parity.md §4.4, and their §8.2 errors, byte for byte."""
from __future__ import annotations

import pytest

from base.errors import ApiError
from base.jsonio import dumps
from resources.tokenize import detokenize, tokenize

CASES = [
    ({"model": "tiny", "prompt": "Hello world"},
     '{"count":3,"max_model_len":2048,"tokens":[1,22177,4304],"token_strs":null}'),
    ({"prompt": "Hello world", "add_special_tokens": False, "return_token_strs": True},
     '{"count":2,"max_model_len":2048,"tokens":[22177,4304],"token_strs":["Hello","Ġworld"]}'),
    ({"model": "tiny", "messages": [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Hi"}],
      "return_token_strs": True},
     '{"count":7,"max_model_len":2048,"tokens":[1,3,5934,13426,1338,37133,4],"token_strs":'
     '["<s>","[INST]","Be","Ġbrief",".ĊĊ","Hi","[/INST]"]}'),
    ({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}],
      "add_special_tokens": True},
     '{"count":5,"max_model_len":2048,"tokens":[1,1,3,37133,4],"token_strs":null}'),
    ({"model": "tiny", "prompt": ""},
     '{"count":1,"max_model_len":2048,"tokens":[1],"token_strs":null}'),
]


@pytest.mark.parametrize("body,expected", CASES)
def test_tokenize_bodies(ctx, body, expected):
    assert tokenize(body, ctx).decode() == expected


def test_tokenize_has_no_length_limit_and_takes_tools(ctx):
    body = tokenize({"prompt": " hello" * 3000}, ctx)
    assert body.startswith(b'{"count":3001,"max_model_len":2048,')
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert tokenize({"messages": [{"role": "user", "content": "Hi"}], "tools": tools},
                    ctx).startswith(b'{"count":4,')


@pytest.mark.parametrize("tokens,expected", [
    ([1, 22177, 4304, 2, 3], '{"prompt":"<s>Hello world</s>[INST]"}'),
    ([200000], '{"prompt":""}'),
    ([1240, 1159], '{"prompt":"�"}'),
])
def test_detokenize_bodies(ctx, tokens, expected):
    assert detokenize({"model": "tiny", "tokens": tokens}, ctx).decode() == expected


def error(fn, ctx, body) -> tuple[int, str]:
    with pytest.raises(ApiError) as info:
        fn(body, ctx)
    return info.value.status, dumps(info.value.to_envelope()).decode()


def test_errors_verbatim(ctx):
    assert error(tokenize, ctx, {"messages": [{"role": "user", "content": "Hi"}],
                                 "continue_final_message": True,
                                 "add_generation_prompt": True}) == (
        400, '{"error":{"message":"Cannot set both `continue_final_message` and '
        '`add_generation_prompt` to True.","type":"BadRequestError","param":null,"code":400}}')
    assert error(detokenize, ctx, {"model": "tiny", "tokens": [-1]}) == (
        400, '{"error":{"message":"1 validation error:\\n  {\'type\': \'greater_than_equal\', '
        "'loc': 'body.tokens.0', 'msg': 'Input should be greater than or equal to 0', 'input': "
        "'-1', 'ctx': {'ge': 0}}\",\"type\":\"Bad Request\",\"param\":\"body.tokens.0\","
        '"code":400}}')
    for fn, body in ((tokenize, {"model": "nope", "prompt": "x"}),
                     (tokenize, {"model": "nope", "messages": []}),
                     (detokenize, {"model": "nope", "tokens": [1]})):
        assert error(fn, ctx, body) == (
            404, '{"error":{"message":"The model `nope` does not exist. Valid aliases: tiny.",'
            '"type":"NotFoundError","param":"model","code":404}}')
    assert error(tokenize, ctx, {"messages": [], "chat_template": "x"})[0] == 400
    # The body is a union of the two forms: both forms' errors are listed.
    assert error(tokenize, ctx, {"prompt": 5}) == (
        400, '{"error":{"message":"2 validation errors:\\n  {\'type\': \'string_type\', '
        "'loc': 'body.prompt', 'msg': 'Input should be a valid string', 'input': '5'}\\n  "
        "{'type': 'missing', 'loc': 'body.messages', 'msg': 'Field required', 'input': '<dict "
        "of 1 items>'}\",\"type\":\"Bad Request\",\"param\":\"body.prompt\",\"code\":400}}")
    assert error(tokenize, ctx, {"messages": "hi"})[1].startswith(
        '{"error":{"message":"2 validation errors:\\n  {\'type\': \'missing\', '
        "'loc': 'body.prompt'")
    assert error(tokenize, ctx, [1])[1].count("model_attributes_type") == 1


# Regressions: these once answered 500 (a TypeError while joining the parts, and the
# tokenizer's OverflowError). vLLM 0.32's answers, captured from its Python frontend.
DOCS = "    For further information visit https://errors.pydantic.dev/2.14/v/"


def _vllm_part_error(lines: list[tuple[str, str, str, str]]) -> str:
    """pydantic's ValidationError text for one lazily validated content part."""
    head = f"{len(lines)} validation error{'s' if len(lines) != 1 else ''} for ValidatorIterator"
    return "\n".join([head] + [f"{loc}\n  {msg} [type={kind}, {inp}]\n{DOCS}{kind}"
                               for loc, msg, kind, inp in lines])


def _bad_request(message: str) -> tuple[int, str]:
    return 400, dumps({"error": {"message": message, "type": "BadRequestError", "param": None,
                                 "code": 400}}).decode()


@pytest.mark.parametrize("text,shown", [(True, "input_value=True, input_type=bool"),
                                        (5, "input_value=5, input_type=int"),
                                        (2.5, "input_value=2.5, input_type=float")])
def test_a_text_part_that_is_not_a_string_gets_vllms_400(ctx, text, shown):
    part = {"type": "text", "text": text}
    dict_shown = f"input_value={part!r}, input_type=dict"
    expected = _vllm_part_error([
        ("0.ChatCompletionContentPartTextParam.text", "Input should be a valid string",
         "string_type", shown),
        ("0.ChatCompletionContentPartImageParam.image_url", "Field required", "missing",
         dict_shown),
        ("0.ChatCompletionContentPartImageParam.type", "Input should be 'image_url'",
         "literal_error", "input_value='text', input_type=str"),
        ("0.ChatCompletionContentPartInputAudioParam.input_audio", "Field required", "missing",
         dict_shown),
        ("0.ChatCompletionContentPartInputAudioParam.type", "Input should be 'input_audio'",
         "literal_error", "input_value='text', input_type=str"),
        ("0.File.file", "Field required", "missing", dict_shown),
        ("0.File.type", "Input should be 'file'", "literal_error",
         "input_value='text', input_type=str"),
    ])
    body = {"messages": [{"role": "user", "content": [part]}]}
    assert error(tokenize, ctx, body) == _bad_request(expected)


def test_a_part_that_is_not_an_object_gets_vllms_400_per_role(ctx):
    system = {"messages": [{"role": "system", "content": [True]}]}
    assert error(tokenize, ctx, system) == _bad_request(_vllm_part_error([
        ("0", "Input should be a valid dictionary", "dict_type",
         "input_value=True, input_type=bool")]))
    assistant = {"messages": [{"role": "user", "content": "hi"},
                              {"role": "assistant", "content": [{"type": "text", "text": "a"},
                                                                7]}]}
    assert error(tokenize, ctx, assistant) == _bad_request(_vllm_part_error([
        (f"1.{name}", "Input should be a valid dictionary", "dict_type",
         "input_value=7, input_type=int")
        for name in ("ChatCompletionContentPartTextParam",
                     "ChatCompletionContentPartRefusalParam")]))
    long_text = {"messages": [{"role": "tool", "tool_call_id": "c",
                               "content": [{"type": "text", "text": [1] * 30}]}]}
    assert error(tokenize, ctx, long_text) == _bad_request(_vllm_part_error([
        ("0.text", "Input should be a valid string", "string_type",
         "input_value=[1, 1, 1, 1, 1, 1, 1, 1, ... 1, 1, 1, 1, 1, 1, 1, 1], input_type=list")]))


@pytest.mark.parametrize("tokens", [[2 ** 32], [5, 2 ** 63 - 1], [4294967296.0]])
def test_detokenize_ids_past_u32_get_vllms_400(ctx, tokens):
    assert error(detokenize, ctx, {"tokens": tokens}) == _bad_request(
        "number too large to fit in target type")
    assert detokenize({"tokens": [2 ** 32 - 1, 2 ** 31]}, ctx) == b'{"prompt":""}'


@pytest.mark.parametrize("content", [True, False, 7, 2.5])
def test_tokenize_chat_content_that_is_a_scalar_gets_a_400(ctx, content):
    """Issue 10's first bug: a bool or number as a message's content was a 500 (``TypeError:
    'bool' object is not iterable``); it is pydantic's 400 for the union (exact bytes against
    vLLM in tests/interop/test_vllm_bad_input.py)."""
    with pytest.raises(ApiError) as info:
        tokenize({"messages": [{"role": "user", "content": content}]}, ctx)
    assert info.value.status == 400
    envelope = info.value.to_envelope()["error"]
    assert envelope["type"] == "Bad Request" and "Input should be a valid string" in envelope[
        "message"]
