"""prepare_completion: prompt forms, tokenization, truncation, the wire SamplingParams, and every
conversion-time error of docs/text-parity.md §8.2 (status, type, param and message, byte for byte)."""
from __future__ import annotations

import msgspec
import pytest

from resources.completions import prepare_completion
from tests.support.errors import raised

FRANCE_IDS = [1, 1784, 8961, 1307, 5498, 1395]
LETTERS = "a b c d e f g h i j k l"


def prep(ctx, **body):
    return prepare_completion({"model": "tiny", **body}, ctx)


def error_body(ctx, body) -> tuple[int, bytes]:
    return raised(prepare_completion, body, ctx)


def test_text_prompt_gets_bos_and_wire_defaults(ctx):
    p = prep(ctx, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert p.kind == "completion" and p.model == "tiny" and not p.stream
    assert p.request_id.startswith("cmpl-") and len(p.request_id) == 21
    (choice,) = p.choices
    assert choice.prompt_token_ids == FRANCE_IDS
    wire = msgspec.msgpack.decode(msgspec.msgpack.encode(choice.sampling_params))
    assert wire["max_tokens"] == 8 and wire["temperature"] == 0.0
    assert wire["output_kind"] == 2  # FINAL_ONLY
    assert wire["_eos_token_id"] == 2 and wire["_all_stop_token_ids"] == [2]
    assert "n" not in wire  # always 1 on the wire


def test_prompt_forms(ctx):
    assert prep(ctx, prompt="Hello", add_special_tokens=False).choices[0].prompt_token_ids == [
        22177]
    assert prep(ctx, prompt=[1784, 8961]).choices[0].prompt_token_ids == [1784, 8961]
    multi = prep(ctx, prompt=["Hello", "The capital of France is"])
    assert [c.prompt_token_ids for c in multi.choices] == [[1, 22177], FRANCE_IDS]
    assert [c.index for c in multi.choices] == [0, 1] and multi.num_prompts == 2
    assert prep(ctx, prompt=[[1, 2], [3]]).choices[1].prompt_token_ids == [3]
    assert prep(ctx, prompt=[""]).choices[0].prompt_token_ids == [1]
    assert prep(ctx, prompt="<s>[INST]x[/INST]").choices[0].prompt_token_ids == [1, 1, 3, 1120, 4]


def test_lax_coercion_and_unknown_fields(ctx):
    p = prep(ctx, prompt="x", stream="yes", temperature="0", max_tokens="3", whatever=1)
    assert p.stream and p.choices[0].sampling_params.temperature == 0.0
    assert p.choices[0].sampling_params.max_tokens == 3
    assert p.choices[0].sampling_params.output_kind == 1  # DELTA
    assert prepare_completion({"prompt": "x"}, ctx).model == "tiny"  # model is optional


def test_default_max_tokens_and_clamp(ctx):
    assert prep(ctx, prompt="x").choices[0].sampling_params.max_tokens == 16
    assert prep(ctx, prompt="x", max_tokens=None).choices[0].sampling_params.max_tokens == 16
    long_prompt = [5] * 2001
    assert prep(ctx, prompt=long_prompt, max_tokens=100).choices[0].sampling_params.max_tokens \
        == 47


def test_truncation_rules(ctx):
    full = [1, 1097, 1289, 1272, 1266, 1324, 1284, 1343, 1310, 1623, 1475, 1409, 1295]
    assert prep(ctx, prompt=LETTERS).choices[0].prompt_token_ids == full
    assert prep(ctx, prompt=LETTERS, truncate_prompt_tokens=5).choices[0].prompt_token_ids == [
        1, 1623, 1475, 1409, 1295]
    left = prep(ctx, prompt=LETTERS, truncate_prompt_tokens=5, truncation_side="left")
    assert left.choices[0].prompt_token_ids == [1310, 1623, 1475, 1409, 1295]
    right = prep(ctx, prompt=LETTERS, truncate_prompt_tokens=5, truncation_side="right")
    assert right.choices[0].prompt_token_ids == full[:5]
    ids = prep(ctx, prompt=[1, 2, 3, 4, 5, 6, 7, 8], truncate_prompt_tokens=5)
    assert ids.choices[0].prompt_token_ids == [4, 5, 6, 7, 8]
    minus_one = prep(ctx, prompt=[7] * 3000, truncate_prompt_tokens=-1)
    assert len(minus_one.choices[0].prompt_token_ids) == 2047
    assert minus_one.choices[0].sampling_params.max_tokens == 1


def test_echo_prompt_text(ctx):
    assert prep(ctx, prompt="Hello", echo=True).choices[0].prompt_text == "Hello"
    assert prep(ctx, prompt=[1, 22177], echo=True).choices[0].prompt_text == "<s>Hello"
    assert prep(ctx, prompt="Hello", echo=True, return_token_ids=True).choices[0].prompt_text \
        == ""
    echo_only = prep(ctx, prompt="Hello", echo=True, max_tokens=0, logprobs=2)
    assert echo_only.echo_only and echo_only.choices[0].sampling_params.max_tokens == 1
    assert echo_only.choices[0].prompt_logprobs == 2  # echo asks for prompt logprobs


def test_n_fans_out_with_seeds(ctx):
    p = prep(ctx, prompt=["a", "b"], n=3, seed=10, temperature=0.7)
    assert [c.index for c in p.choices] == [0, 1, 2, 3, 4, 5]
    assert [c.prompt_index for c in p.choices] == [0, 0, 0, 1, 1, 1]
    assert [c.sampling_params.seed for c in p.choices] == [10, 11, 12, 10, 11, 12]
    assert p.choices[4].external_req_id == f"1_{p.request_id}-1"


def test_stop_and_generation_config(ctx):
    p = prep(ctx, prompt="x", stop="bern", stop_token_ids=[73750, 73750], ignore_eos=True,
             include_stop_str_in_output=False)
    sp = p.choices[0].sampling_params
    assert sp.stop == ["bern"] and sp.stop_token_ids == [73750]
    assert sp.eos_token_id is None and sorted(sp.all_stop_token_ids) == [2, 73750]
    assert sp.output_text_buffer_length == 3 and p.choices[0].stop == ["bern"]


def test_request_ids(ctx):
    assert prep(ctx, prompt="x", request_id="my-id-1").request_id == "cmpl-my-id-1"
    p = prepare_completion({"prompt": "x", "request_id": "b"}, ctx, header_request_id="hdr-id-2")
    assert p.request_id == "cmpl-hdr-id-2"


def test_extras_on_the_wire(ctx):
    p = prep(ctx, prompt="x", vllm_xargs={"k": [1, "a"]}, logit_bias={"5": 300},
             response_format={"type": "json_object"}, allowed_token_ids=[5, 6], priority=3)
    sp = p.choices[0].sampling_params
    assert sp.extra_args == {"k": [1, "a"]} and sp.logit_bias == {5: 100.0}
    assert sp.structured_outputs["json_object"] is True
    assert sp.structured_outputs["_backend"] == "xgrammar"
    assert len(sp.structured_outputs) == 11 and p.priority == 3
    schema = prep(ctx, prompt="x", response_format={"type": "json_schema",
                                                    "json_schema": {"name": "n", "schema": {}}})
    assert schema.choices[0].sampling_params.structured_outputs["json"] == {}


def test_stream_options(ctx):
    p = prep(ctx, prompt="x", stream=True, stream_options={"include_usage": True,
                                                           "continuous_usage_stats": True})
    assert p.include_usage and p.continuous_usage
    # vLLM 0.32's StreamOptions: include_usage defaults to false, so an empty object adds nothing
    assert prep(ctx, prompt="x", stream=True, stream_options={}).include_usage is False
    assert prep(ctx, prompt="x", stream=True).include_usage is False
    only = prep(ctx, prompt="x", stream=True, stream_options={"continuous_usage_stats": True})
    assert not only.include_usage and not only.continuous_usage


V = "1 validation error:\\n  "
CASES = [
    ([1, 2], 400, '{"error":{"message":"' + V + "{'type': 'model_attributes_type', 'loc': 'body'"
     ", 'msg': 'Input should be a valid dictionary or object to extract fields from', 'input': "
     "'<list of 2 items>'}\",\"type\":\"Bad Request\",\"param\":\"body\",\"code\":400}}"),
    ({"model": "nope", "prompt": "hi"}, 404, '{"error":{"message":"The model `nope` does not '
     'exist. Valid aliases: tiny.","type":"NotFoundError","param":"model","code":404}}'),
    ({"prompt": "x", "max_tokens": -1}, 400, '{"error":{"message":"max_tokens must be at least '
     '1, got -1. (parameter=max_tokens, value=-1)","type":"BadRequestError","param":'
     '"max_tokens","code":400}}'),
    ({"prompt": "x", "max_tokens": 0}, 400, '{"error":{"message":"max_tokens must be at least '
     '1, got 0. (parameter=max_tokens, value=0)","type":"BadRequestError","param":"max_tokens",'
     '"code":400}}'),
    ({"prompt": "x", "max_tokens": 4000}, 400, '{"error":{"message":"max_tokens=4000 cannot be '
     'greater than max_model_len=2048. Please request fewer output tokens. (parameter='
     'max_tokens, value=4000)","type":"BadRequestError","param":"max_tokens","code":400}}'),
    ({"prompt": "x", "temperature": 3}, 400, '{"error":{"message":"temperature must be in '
     '[0, 2], got 3.0. (parameter=temperature, value=3.0)","type":"BadRequestError","param":'
     '"temperature","code":400}}'),
    ({"prompt": "x", "top_p": 0}, 400, '{"error":{"message":"top_p must be in (0, 1], got 0.0. '
     '(parameter=top_p, value=0.0)","type":"BadRequestError","param":"top_p","code":400}}'),
    ({"prompt": "x", "max_tokens": "ten"}, 400, '{"error":{"message":"' + V + "{'type': "
     "'int_parsing', 'loc': 'body.max_tokens', 'msg': 'Input should be a valid integer, unable "
     "to parse string as an integer', 'input': 'ten'}\",\"type\":\"Bad Request\",\"param\":"
     "\"body.max_tokens\",\"code\":400}}"),
    ({"prompt": "x", "temperature": "abc"}, 400, '{"error":{"message":"' + V + "{'type': "
     "'float_parsing', 'loc': 'body.temperature', 'msg': 'Input should be a valid number, "
     "unable to parse string as a number', 'input': 'abc'}\",\"type\":\"Bad Request\",\"param\":"
     "\"body.temperature\",\"code\":400}}"),
    ({"prompt": {"a": 1}}, 400, '{"error":{"message":"4 validation errors:\\n  {\'type\': '
     "'list_type', 'loc': 'body.prompt', 'msg': 'Input should be a valid list', 'input': '<dict "
     "of 1 items>'}\\n  {'type': 'list_type', 'loc': 'body.prompt', 'msg': 'Input should be a "
     "valid list', 'input': '<dict of 1 items>'}\\n  {'type': 'string_type', 'loc': "
     "'body.prompt', 'msg': 'Input should be a valid string', 'input': '<dict of 1 items>'}\\n  "
     "{'type': 'list_type', 'loc': 'body.prompt', 'msg': 'Input should be a valid list', "
     "'input': '<dict of 1 items>'}\",\"type\":\"Bad Request\",\"param\":\"body.prompt\","
     "\"code\":400}}"),
    ({"prompt": ""}, 400, '{"error":{"message":"Either prompt or prompt_embeds must be provided '
     'and non-empty. (parameter=prompt)","type":"BadRequestError","param":"prompt","code":400}}'),
    ({"model": "tiny"}, 400, '{"error":{"message":"Either prompt or prompt_embeds must be '
     'provided and non-empty. (parameter=prompt)","type":"BadRequestError","param":"prompt",'
     '"code":400}}'),
    ({"prompt": []}, 400, '{"error":{"message":"You must pass at least one prompt","type":'
     '"BadRequestError","param":null,"code":400}}'),
    ({"prompt": [1, 131072]}, 400, '{"error":{"message":"Token id 131072 is out of vocabulary",'
     '"type":"BadRequestError","param":null,"code":400}}'),
    ({"prompt": "x", "n": 2, "temperature": 0}, 400, '{"error":{"message":"n must be 1 when '
     'using greedy sampling, got 2.","type":"BadRequestError","param":null,"code":400}}'),
    ({"prompt": "x", "n": 0}, 400, '{"error":{"message":"n must be at least 1, got 0.","type":'
     '"BadRequestError","param":null,"code":400}}'),
    ({"prompt": "x", "n": 20000}, 400, '{"error":{"message":"n must be at most 16384, got 20000.'
     ' To increase this limit, set the VLLM_MAX_N_SEQUENCES environment variable.","type":'
     '"BadRequestError","param":null,"code":400}}'),
    ({"prompt": "x", "use_beam_search": True, "stream": True}, 400, '{"error":{"message":'
     '"Streaming is not currently supported with beam search","type":"BadRequestError",'
     '"param":null,"code":400}}'),
    ({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, 400, '{"error":{"message":"2 '
     "validation errors:\\n  {'type': 'string_type', 'loc': 'body.stop', 'msg': 'Input should "
     "be a valid string', 'input': '<list of 5 items>'}\\n  {'type': 'too_long', 'loc': "
     "'body.stop', 'msg': 'List should have at most 4 items after validation, not 5', 'input': "
     "'<list of 5 items>', 'ctx': {'field_type': 'List', 'max_length': 4, 'actual_length': 5}}"
     '","type":"Bad Request","param":"body.stop","code":400}}'),
    ({"prompt": "x", "stop": [""]}, 400, '{"error":{"message":"stop cannot contain an empty '
     'string.","type":"BadRequestError","param":null,"code":400}}'),
    ({"prompt": "x", "min_tokens": 5, "max_tokens": 2}, 400, '{"error":{"message":"min_tokens '
     'must be less than or equal to max_tokens=2, got 5.","type":"BadRequestError","param":'
     'null,"code":400}}'),
    ({"prompt": "x", "stream_options": {"include_usage": True}}, 400, '{"error":{"message":'
     '"Stream options can only be defined when `stream=True`. (parameter=stream_options)",'
     '"type":"BadRequestError","param":"stream_options","code":400}}'),
    ({"prompt": "x", "logit_bias": {"abc": 1}}, 400, '{"error":{"message":"logit_bias contains '
     "key(s) that cannot be converted to integer token IDs: ['abc'] (parameter=logit_bias, "
     "value=['abc'])\",\"type\":\"BadRequestError\",\"param\":\"logit_bias\",\"code\":400}}"),
    ({"prompt": "x", "logit_bias": {"999999": 1}}, 400, '{"error":{"message":"token_id(s) '
     '[999999] in logit_bias contain out-of-vocab token ids. Vocabulary size: 131072 (parameter='
     'logit_bias, value=[999999])","type":"BadRequestError","param":"logit_bias","code":400}}'),
    ({"prompt": "x", "stop_token_ids": [999999]}, 400, '{"error":{"message":"token_id(s) '
     '[999999] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: 131072 '
     '(parameter=stop_token_ids, value=[999999])","type":"BadRequestError","param":'
     '"stop_token_ids","code":400}}'),
    ({"prompt": "x", "truncate_prompt_tokens": 5000}, 400, '{"error":{"message":'
     '"truncate_prompt_tokens=5000 cannot be greater than max_model_len = 2048. Please request a '
     'smaller truncation size. (parameter=truncate_prompt_tokens, value=5000)","type":'
     '"BadRequestError","param":"truncate_prompt_tokens","code":400}}'),
    ({"prompt": "x", "truncate_prompt_tokens": 0}, 400, '{"error":{"message":"The decoder '
     'prompt cannot be empty","type":"BadRequestError","param":null,"code":400}}'),
    ({"prompt": " hello" * 2101}, 400, '{"error":{"message":"This model\'s maximum context '
     "length is 2048 tokens. However, your prompt contains at least 2049 input tokens, which "
     "exceeds this limit even without any output tokens. Please reduce the length of the input "
     "prompt. (parameter=input_tokens, value=2049)\",\"type\":\"BadRequestError\",\"param\":"
     "\"input_tokens\",\"code\":400}}"),
    ({"prompt": " hello" * 2047}, 400, '{"error":{"message":"max_tokens must be at least 1, got '
     '0. (parameter=max_tokens, value=0)","type":"BadRequestError","param":"max_tokens",'
     '"code":400}}'),
    ({"prompt": "Hi", "echo": True, "suffix": "x"}, 400, '{"error":{"message":"Echo is '
     'unsupported with suffix.","type":"BadRequestError","param":"suffix","code":400}}'),
]


@pytest.mark.parametrize("body,status,expected", CASES)
def test_errors_verbatim(ctx, body, status, expected):
    got_status, got = error_body(ctx, body)
    assert (got_status, got.decode()) == (status, expected)


def test_character_precheck(ctx):
    limit = 2048 * ctx.tokenizer.max_chars_per_token
    status, body = error_body(ctx, {"prompt": "a" * (limit + 1)})
    assert status == 400
    assert (f"your prompt contains {limit + 1} characters (more than {limit} characters, which "
            "is the upper bound for 2048 input tokens)").encode() in body
    assert b'"param":"input_text"' in body


def test_more_type_errors(ctx):
    status, body = error_body(ctx, {"prompt": [-1]})
    assert status == 400 and b"'type': 'greater_than_equal', 'loc': 'body.prompt.0'" in body
    status, body = error_body(ctx, {"prompt": "x", "n": None})
    assert b"'type': 'int_type', 'loc': 'body.n'" in body
    status, body = error_body(ctx, {"prompt": "x", "logprobs": "5"})
    assert b"`logprobs` must be an integer. (parameter=logprobs, value=5)" in body
    status, body = error_body(ctx, {"prompt": "x", "logprobs": 30})
    assert b"Requested sample logprobs of 30, which is greater than max allowed: 20" in body


def test_unsupported_features_are_refused(ctx):
    for body in ({"prompt": "x", "suffix": "y"}, {"prompt": "x", "prompt_embeds": "abc"}):
        status, _ = error_body(ctx, body)
        assert status == 400


def test_lax_rules_match_pydantic():
    """Our coercion restates pydantic 2's lax mode; compare on tricky inputs when pydantic is
    installed (it is a dev-only dependency, via openai)."""
    pydantic = pytest.importorskip("pydantic")
    from resources.common.fields import INVALID, v_bool, v_float, v_int, v_str
    values = ["ten", " 5 ", "5.0", "5.5", "1e3", "+5", "1_000", 5.0, 5.5, True, None, [1],
              {"a": 1}, "inf", "nan", "yes", "OFF", "2", 2, 0, 1.0, "", float("inf"), 10 ** 30,
              "-0", "0x10", "5.", -3, "T"]
    for tp, mine in ((int, v_int()), (float, v_float()), (bool, v_bool()), (str, v_str())):
        adapter = pydantic.TypeAdapter(tp)
        for value in values:
            errors: list = []
            got = mine(value, ("body", "f"), errors)
            try:
                want, want_err = adapter.validate_python(value), None
            except pydantic.ValidationError as exc:
                want, want_err = INVALID, exc.errors()[0]
            if want is INVALID:
                assert got is INVALID and (errors[0]["type"], errors[0]["msg"]) == (
                    want_err["type"], want_err["msg"]), (tp, value)
            else:
                assert type(got) is type(want) and (got == want or got != got), (tp, value)
