"""prepare_generate (/inference/v1/generate): the wire SamplingParams, the server's defaults, and
the request errors, byte for byte as vLLM 0.32 answered the same bodies (captured live from
``vllm serve --enable-scale-out`` on the tiny Tekken model, max_model_len 2048)."""
from __future__ import annotations

import dataclasses

import msgspec
import pytest

from resources.generate.convert import prepare_generate
from tests.support.errors import raised

PROMPT = [1, 22177, 1044]


def prep(ctx, sampling=None, **body):
    return prepare_generate({"token_ids": PROMPT, "sampling_params": sampling or {}, **body}, ctx)


def wire(prepared, i=0):
    return msgspec.msgpack.decode(msgspec.msgpack.encode(prepared.choices[i].sampling_params))


def error(ctx, body) -> tuple[int, bytes]:
    return raised(prepare_generate, body, ctx)


def test_greedy_request_to_the_wire(ctx):
    p = prep(ctx, {"max_tokens": 4, "temperature": 0})
    assert p.kind == "generate" and p.model == "tiny" and not p.stream
    assert p.request_id.startswith("generate-tokens-")
    assert p.output_mode == "tokens"
    assert all(c.sampling_params.detokenize for c in p.choices)
    (choice,) = p.choices
    assert choice.prompt_token_ids == PROMPT and choice.external_req_id == p.request_id
    w = wire(p)
    assert w["max_tokens"] == 4 and w["temperature"] == 0.0 and w["output_kind"] == 2
    assert w["_eos_token_id"] == 2 and w["_all_stop_token_ids"] == [2]
    assert "detokenize" not in w and "extra_args" not in w


def test_sampling_defaults_are_samplingparams_not_the_generation_config(ctx):
    # The OpenAI endpoints take temperature etc. from generation_config.json; /generate takes
    # SamplingParams' own defaults, and max_tokens is the context left.
    tuned = dataclasses.replace(ctx, generation_defaults={"temperature": 0.3, "top_k": 7})
    w = wire(prep(tuned))
    assert w["temperature"] == 1.0 and w.get("top_k", 0) == 0
    assert w["max_tokens"] == 2048 - len(PROMPT)
    assert wire(prep(ctx, {"max_tokens": None}))["max_tokens"] == 2048 - len(PROMPT)
    capped = dataclasses.replace(ctx, generation_defaults={"max_tokens": 5})
    assert wire(prep(capped))["max_tokens"] == 5
    assert wire(prep(capped, {"max_tokens": 9}))["max_tokens"] == 9


def test_stream_output_kind_and_usage_options(ctx):
    p = prep(ctx, stream=True, stream_options={"include_usage": True,
                                               "continuous_usage_stats": True})
    assert p.stream and p.include_usage and p.continuous_usage and wire(p)["output_kind"] == 1
    forced = dataclasses.replace(ctx, enable_force_include_usage=True)
    p = prep(forced, stream=True)
    assert not p.include_usage  # vLLM's /generate ignores --enable-force-include-usage
    assert not prep(ctx, stream_options={"include_usage": True}).include_usage


def test_fields_passed_as_they_are(ctx):
    w = wire(prep(ctx, {"logit_bias": {"5": 150}, "extra_args": {"sim_output_mode": "echo"},
                        "detokenize": False, "seed": -1, "skip_reading_prefix_cache": True,
                        "stop_token_ids": [7, 7, 9], "thinking_token_budget": -1},
                  kv_transfer_params={"do_remote_prefill": True}, ec_transfer_params={"e": 1}))
    assert w["logit_bias"] == {5: 150.0}  # not clamped to 100 as the OpenAI endpoints do
    assert w["extra_args"] == {"sim_output_mode": "echo",
                               "kv_transfer_params": {"do_remote_prefill": True},
                               "ec_transfer_params": {"e": 1}}
    assert w["detokenize"] is False and "seed" not in w and w["skip_reading_prefix_cache"]
    assert w["stop_token_ids"] == [7, 9] and "thinking_token_budget" not in w


def test_n_fans_out_with_seeds_and_child_ids(ctx):
    p = prep(ctx, {"n": 3, "seed": 10}, request_id="abc")
    assert p.request_id == "generate-tokens-abc"
    assert [c.external_req_id for c in p.choices] == [f"{i}_generate-tokens-abc"
                                                      for i in range(3)]
    assert [wire(p, i)["seed"] for i in range(3)] == [10, 11, 12]
    header = prepare_generate({"token_ids": [1], "sampling_params": {}, "request_id": "x"}, ctx,
                              header_request_id="hdr")
    assert header.request_id == "generate-tokens-hdr"


def test_text_mode_and_prompt_options(ctx):
    p = prep(ctx, {"stop": "Ku", "include_stop_str_in_output": True, "logprobs": 2,
                   "prompt_logprobs": 1}, output_mode="text", return_token_ids=True,
             cache_salt="salt", priority=3)
    (choice,) = p.choices
    assert p.output_mode == "text" and p.return_token_ids and p.logprobs == 2
    assert choice.stop == ["Ku"] and choice.include_stop_str_in_output
    assert choice.logprobs == 2 and choice.prompt_logprobs == 1
    assert p.cache_salt == "salt" and p.priority == 3


BASE = {"token_ids": [1, 2], "sampling_params": {}}
# (body, status, exact vLLM 0.32 envelope)
ERRORS = [
    ([1], 400, b'{"error":{"message":"1 validation error:\\n  {\'type\': '
     b'\'model_attributes_type\', \'loc\': \'body\', \'msg\': \'Input should be a valid '
     b'dictionary or object to extract fields from\', \'input\': \'<list of 1 items>\'}",'
     b'"type":"Bad Request","param":"body","code":400}}'),
    ({"token_ids": [1, 2]}, 400, b'{"error":{"message":"1 validation error:\\n  {\'type\': '
     b'\'missing\', \'loc\': \'body.sampling_params\', \'msg\': \'Field required\', \'input\': '
     b'\'<dict of 1 items>\'}","type":"Bad Request","param":"body.sampling_params","code":400}}'),
    ({"token_ids": [], "sampling_params": {}}, 400, b'{"error":{"message":"1 validation error:'
     b'\\n  {\'type\': \'too_short\', \'loc\': \'body.token_ids\', \'msg\': \'List should have at '
     b'least 1 item after validation, not 0\', \'input\': \'<list of 0 items>\', \'ctx\': '
     b'{\'field_type\': \'List\', \'min_length\': 1, \'actual_length\': 0}}","type":"Bad Request",'
     b'"param":"body.token_ids","code":400}}'),
    ({"token_ids": [1, 2], "sampling_params": None}, 400, b'{"error":{"message":"2 validation '
     b'errors:\\n  {\'type\': \'is_instance_of\', \'loc\': \'body.sampling_params\', \'msg\': '
     b'\'Input should be an instance of SamplingParams\', \'input\': \'None\', \'ctx\': '
     b'{\'class\': \'SamplingParams\'}}\\n  {\'type\': \'dict_type\', \'loc\': '
     b'\'body.sampling_params\', \'msg\': \'Input should be a valid dictionary\', \'input\': '
     b'\'None\'}","type":"Bad Request",'
     b'"param":"body.sampling_params","code":400}}'),
    ({"token_ids": [1, -2], "sampling_params": {"max_tokens": "x"}, "output_mode": "x"}, 400,
     b'{"error":{"message":"4 validation errors:\\n  {\'type\': \'value_error\', \'loc\': '
     b'\'body.token_ids\', \'msg\': \'Value error, token_ids must not contain negative values\', '
     b'\'input\': \'<list of 2 items>\', \'ctx\': {\'error\': ValueError(\'token_ids must not '
     b'contain negative values\')}}\\n  {\'type\': \'is_instance_of\', \'loc\': '
     b'\'body.sampling_params\', \'msg\': \'Input should be an instance of SamplingParams\', '
     b'\'input\': \'<dict of 1 items>\', \'ctx\': {\'class\': \'SamplingParams\'}}\\n  {\'type\': '
     b'\'int_parsing\', \'loc\': \'body.sampling_params.max_tokens\', \'msg\': \'Input should be a '
     b'valid integer, unable to parse string as an integer\', \'input\': \'x\'}\\n  {\'type\': '
     b'\'literal_error\', \'loc\': \'body.output_mode\', \'msg\': \\"Input should be \'tokens\' or '
     b'\'text\'\\", \'input\': \'x\', \'ctx\': {\'expected\': \\"\'tokens\' or \'text\'\\"}}",'
     b'"type":"Bad Request","param":"body.token_ids","code":400}}'),
    ({"token_ids": [1, 2], "sampling_params": {"logit_bias": {"x": 1.0}, "output_kind": 7}}, 400,
     b'{"error":{"message":"3 validation errors:\\n  {\'type\': \'is_instance_of\', \'loc\': '
     b'\'body.sampling_params\', \'msg\': \'Input should be an instance of SamplingParams\', '
     b'\'input\': \'<dict of 2 items>\', \'ctx\': {\'class\': \'SamplingParams\'}}\\n  {\'type\': '
     b'\'enum\', \'loc\': \'body.sampling_params.output_kind\', \'msg\': \'Input should be 0, 1 or '
     b'2\', \'input\': \'7\', \'ctx\': {\'expected\': \'0, 1 or 2\'}}\\n  {\'type\': '
     b'\'int_parsing\', \'loc\': \'body.sampling_params.logit_bias.x\', \'msg\': '
     b'\'Input should be a valid integer, '
     b'unable to parse string as an integer\', \'input\': \'x\'}","type":"Bad Request",'
     b'"param":"body.sampling_params","code":400}}'),
    ({"token_ids": [1, 2], "sampling_params": {"detokenize": False}, "output_mode": "text"}, 400,
     b'{"error":{"message":"1 validation error:\\n  {\'type\': \'value_error\', \'loc\': \'body\', '
     b'\'msg\': \\"Value error, output_mode=\'text\' requires sampling_params.detokenize to be '
     b'true\\", \'input\': \'<dict of 3 items>\', \'ctx\': {\'error\': ValueError(\\"output_mode='
     b'\'text\' requires sampling_params.detokenize to be true\\")}}","type":"Bad Request",'
     b'"param":"body","code":400}}'),
    # A SamplingParams check wins over type errors elsewhere (it raises out of validation).
    ({"token_ids": [1, -2], "sampling_params": {"max_tokens": 2, "temperature": 3}}, 400,
     b'{"error":{"message":"temperature must be in [0, 2], got 3.0. (parameter=temperature, '
     b'value=3.0)","type":"BadRequestError","param":"temperature","code":400}}'),
    ({**BASE, "sampling_params": {"max_tokens": 0}}, 400, b'{"error":{"message":"max_tokens must '
     b'be at least 1, got 0. (parameter=max_tokens, value=0)","type":"BadRequestError",'
     b'"param":"max_tokens","code":400}}'),
    ({**BASE, "sampling_params": {"min_tokens": 20}}, 400, b'{"error":{"message":"min_tokens must '
     b'be less than or equal to max_tokens=16, got 20.","type":"BadRequestError","param":null,'
     b'"code":400}}'),
    ({**BASE, "sampling_params": {"stream_interval": 0}}, 400, b'{"error":{"message":'
     b'"stream_interval must be at least 1, got 0. (parameter=stream_interval, value=0)",'
     b'"type":"BadRequestError","param":"stream_interval","code":400}}'),
    ({**BASE, "sampling_params": {"thinking_token_budget": -5}}, 400, b'{"error":{"message":'
     b'"`thinking_token_budget` must be a non-negative integer or -1 for unlimited. '
     b'(parameter=thinking_token_budget, value=-5)","type":"BadRequestError",'
     b'"param":"thinking_token_budget","code":400}}'),
    ({**BASE, "sampling_params": {"detokenize": False, "stop": "a"}}, 400, b'{"error":{"message":'
     b'"stop strings are only supported when detokenize is True. Set detokenize=True to use '
     b'stop.","type":"BadRequestError","param":null,"code":400}}'),
    ({**BASE, "sampling_params": {"n": 2, "temperature": 0}}, 400, b'{"error":{"message":"n must '
     b'be 1 when using greedy sampling, got 2.","type":"BadRequestError","param":null,'
     b'"code":400}}'),
    ({**BASE, "sampling_params": {"extra_args": {"a": 2 ** 70}}}, 400, b'{"error":{"message":'
     b'"extra_args integers must be between -2**63 and 2**64 - 1. (parameter=extra_args)",'
     b'"type":"BadRequestError","param":"extra_args","code":400}}'),
    ({**BASE, "sampling_params": {"seed": 2 ** 70}}, 400, b'{"error":{"message":"can\'t serialize '
     b'ints < -2**63 or > 2**64 - 1","type":"BadRequestError","param":null,"code":400}}'),
    ({**BASE, "cache_salt": ""}, 400, b'{"error":{"message":"Parameter \'cache_salt\' must be a '
     b'non-empty string if provided. (parameter=cache_salt)","type":"BadRequestError",'
     b'"param":"cache_salt","code":400}}'),
    ({**BASE, "sampling_params": {"temperature": 3}, "cache_salt": "a/b"}, 400,
     b'{"error":{"message":"Parameter \'cache_salt\' must be at most 128 characters and must not '
     b'contain \'@\', \'/\', \'\\\\\\\\\', or NUL. (parameter=cache_salt)",'
     b'"type":"BadRequestError",'
     b'"param":"cache_salt","code":400}}'),
    ({**BASE, "model": "nope"}, 404, b'{"error":{"message":"The model `nope` does not exist. Valid '
     b'aliases: tiny.","type":"NotFoundError","param":"model","code":404}}'),
    ({**BASE, "stream": True, "sampling_params": {"prompt_logprob_token_ids": [[1]]}}, 400,
     b'{"error":{"message":"prompt_logprob_token_ids are not available when stream=true.",'
     b'"type":"BadRequestError","param":null,"code":400}}'),
    ({"token_ids": [1, 999999999], "sampling_params": {}}, 400, b'{"error":{"message":"Token id '
     b'999999999 is out of vocabulary","type":"BadRequestError","param":null,"code":400}}'),
    ({**BASE, "sampling_params": {"logprobs": 25}}, 400, b'{"error":{"message":"Requested sample '
     b'logprobs of 25, which is greater than max allowed: 20 (parameter=logprobs, value=25)",'
     b'"type":"BadRequestError","param":"logprobs","code":400}}'),
    ({**BASE, "sampling_params": {"stop_token_ids": [99999999]}}, 400, b'{"error":{"message":'
     b'"token_id(s) [99999999] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: '
     b'131072 (parameter=stop_token_ids, value=[99999999])","type":"BadRequestError",'
     b'"param":"stop_token_ids","code":400}}'),
    ({**BASE, "sampling_params": {"allowed_token_ids": []}}, 400, b'{"error":{"message":'
     b'"allowed_token_ids is not None and empty! (parameter=allowed_token_ids, value=[])",'
     b'"type":"BadRequestError","param":"allowed_token_ids","code":400}}'),
    ({"token_ids": [1000] * 2049, "sampling_params": {}}, 400, b'{"error":{"message":"Input '
     b'length (2049) exceeds model\'s maximum context length (2048).","type":"BadRequestError",'
     b'"param":null,"code":400}}'),
    ({"token_ids": [1000] * 2049, "sampling_params": {"max_tokens": 5}}, 400, b'{"error":'
     b'{"message":"The decoder prompt (length 2049) is longer than the maximum model length of '
     b'2048. Make sure that `max_model_len` is no smaller than the number of text tokens.",'
     b'"type":"BadRequestError","param":null,"code":400}}'),
    ({"token_ids": [1000] * 2048, "sampling_params": {}}, 400, b'{"error":{"message":"The decoder '
     b'prompt (length 2048) plus the number of requested output tokens (at least 1) is longer '
     b'than the maximum model length of 2048. Make sure that `max_model_len` is no smaller than '
     b'the number of text tokens (prompt + requested output tokens).","type":"BadRequestError",'
     b'"param":null,"code":400}}'),
]


@pytest.mark.parametrize("body,status,expected", ERRORS, ids=range(len(ERRORS)))
def test_errors_match_vllm(ctx, body, status, expected):
    assert error(ctx, body) == (status, expected)


@pytest.mark.parametrize("extra,param", [
    ({"content_parts": [{"type": "image_url", "url": "http://x"}]}, "content_parts"),
    ({"features": {"mm_hashes": {"image": ["h"]},
                   "mm_placeholders": {"image": [{"offset": 0, "length": 1}]}}}, "features"),
    ({"reasoning_ended": True}, "reasoning_ended"),
    ({"reasoning_parser_kwargs": {"chat_template_kwargs": {}}}, "reasoning_parser_kwargs"),
    ({"sampling_params": {"prompt_logprob_token_ids": [[1]]}}, "prompt_logprob_token_ids"),
    ({"sampling_params": {"trace_decode_token_ids": [5]}}, "trace_decode_token_ids"),
])
def test_unsupported_inputs_are_refused_clearly(ctx, extra, param):
    status, body = error(ctx, {**BASE, **extra})
    assert status == 400
    assert b"is not supported by this server (greenfront)." in body
    assert f'"param":"{param}"'.encode() in body


def test_empty_multimodal_fields_are_accepted(ctx):
    # vLLM ignores empty multimodal fields, and so does greenfront.
    p = prep(ctx, content_parts=[], features={"mm_hashes": {}, "mm_placeholders": {}},
             token_offsets=[[0, 1]])
    assert p.choices[0].prompt_token_ids == PROMPT
