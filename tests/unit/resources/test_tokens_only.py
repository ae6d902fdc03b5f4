"""``--tokens-only`` (docs/parity.md §9): the setting on both launch paths, and what it changes in
/inference/v1/generate's conversion (the wire SamplingParams and the refusals, with the words
vLLM 0.32's ``vllm serve --tokens-only`` answered live on the tiny Tekken model)."""
from __future__ import annotations

import dataclasses
import json

import msgspec
import pytest

from base.config import Config
from launch.args_json import settings_from_args_json
from launch.frontend import build_parser
from launch.serve import serve_settings
from middleware.tokens_only import MESSAGE, needs_tokenizer
from resources.generate.convert import prepare_generate
from tests.support.errors import raised

PROMPT = [1, 22177, 1044]


@pytest.fixture
def tokens_only(ctx):
    return dataclasses.replace(ctx, tokens_only=True)


def wire(prepared) -> dict:
    return msgspec.msgpack.decode(msgspec.msgpack.encode(prepared.choices[0].sampling_params))


def prep(ctx, sampling=None, **body):
    return prepare_generate({"token_ids": PROMPT, "sampling_params": sampling or {}, **body}, ctx)


def test_the_setting_on_both_launch_paths_and_its_default():
    assert Config.from_env({}).tokens_only is False
    assert Config.from_env({"GREENFRONT_TOKENS_ONLY": "1"}).tokens_only is True
    settings = settings_from_args_json(json.dumps({"model_tag": "/m", "tokens_only": True}))
    assert settings["GREENFRONT_TOKENS_ONLY"] == "1"
    ns, extra = build_parser().parse_known_args(["serve", "/m", "--tokens-only"])
    assert serve_settings(ns, extra)["GREENFRONT_TOKENS_ONLY"] == "1"
    ns, extra = build_parser().parse_known_args(["serve", "/m"])
    assert "GREENFRONT_TOKENS_ONLY" not in serve_settings(ns, extra)


def test_generate_never_detokenizes_and_knows_no_tokenizer_eos(ctx, tokens_only):
    assert "_eos_token_id" in wire(prep(ctx))  # without the option: the tokenizer's EOS
    w = wire(prep(tokens_only, {"detokenize": True, "max_tokens": 3}))
    assert w["detokenize"] is False
    # the generation config's EOS (2) is a plain stop id, as vLLM without a tokenizer sends it
    assert "_eos_token_id" not in w
    assert w["stop_token_ids"] == [2] and w["_all_stop_token_ids"] == [2]
    ignoring = wire(prep(tokens_only, {"ignore_eos": True}))
    assert not ignoring.get("stop_token_ids") and ignoring["_all_stop_token_ids"] == [2]


@pytest.mark.parametrize("sampling, extra, message", [
    ({"stop": ["a"]}, {}, "stop strings are not supported on a --tokens-only server because "
     "detokenization is disabled. Check stop strings on the coordinator, or use "
     "stop_token_ids."),
    ({}, {"output_mode": "text"}, "output_mode='text' requires a tokenizer, but this server does "
     "not load one (--tokens-only or --skip-tokenizer-init). Send the request to a server that "
     "loads a tokenizer, or use output_mode='tokens'."),
    ({"structured_outputs": {"choice": ["a", "b"]}}, {},
     "Structured outputs requires a tokenizer so it can't be used with 'skip_tokenizer_init'"),
])
def test_generate_refusals_word_for_word(ctx, tokens_only, sampling, extra, message):
    body = {"token_ids": PROMPT, "sampling_params": {"max_tokens": 2, **sampling}, **extra}
    status, envelope = raised(prepare_generate, body, tokens_only)
    assert status == 400
    assert json.loads(envelope) == {"error": {"message": message, "type": "BadRequestError",
                                              "param": None, "code": 400}}
    prepare_generate(body, ctx)  # served without the option


def test_bad_words_are_refused_not_dropped(tokens_only):
    status, envelope = raised(prepare_generate, {"token_ids": PROMPT, "sampling_params": {
        "bad_words": ["a"]}}, tokens_only)
    assert status == 400 and json.loads(envelope)["error"]["param"] == "bad_words"


def test_out_of_vocabulary_ids_stay_a_400(tokens_only):
    # vLLM's frontend checks nothing without a tokenizer and its engine core dies on them
    status, _ = raised(prepare_generate, {"token_ids": [1, 10 ** 6], "sampling_params": {}},
                       tokens_only)
    assert status == 400


def test_the_routes_that_need_the_tokenizer():
    assert MESSAGE == "Tokenizer not available when `skip_tokenizer_init=True`"
    for path in ("/v1/completions", "/v1/chat/completions", "/v1/responses", "/tokenize",
                 "/detokenize"):
        assert needs_tokenizer("POST", path) == "openai"
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        assert needs_tokenizer("POST", path) == "anthropic"
    assert needs_tokenizer("GET", "/tokenizer_info") == "openai"
    for method, path in (("POST", "/inference/v1/generate"), ("POST", "/abort_requests"),
                         ("GET", "/v1/models"), ("GET", "/v1/responses/abc")):
        assert needs_tokenizer(method, path) is None
