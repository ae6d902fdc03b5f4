"""/tokenize and /detokenize bodies of docs/text-parity.md §4.4, and their §8.2 errors, byte for byte."""
from __future__ import annotations

import pytest

from resources.common.fields import struct_matches
from resources.tokenize import detokenize, tokenize, types
from tests.support.errors import raised_text

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
    return raised_text(fn, body, ctx)


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


def test_typed_requests_declare_the_field_tables():
    assert struct_matches(types.COMPLETION_FIELDS, types.TokenizeCompletionRequest)
    assert struct_matches(types.DETOKENIZE_FIELDS, types.DetokenizeRequest)
