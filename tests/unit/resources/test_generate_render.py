"""/inference/v1/generate output: hand-made engine outputs through GenerateState to the bytes a
client sees. The expected bodies are vLLM 0.32's for the same request and tokens (captured
live on the tiny Tekken model; ``request_id``/``created`` normalized)."""
from __future__ import annotations

import re


from engine.protocol import LogprobsLists, LogprobsTensors, encode_ndarray
from resources.generate.convert import prepare_generate
from resources.generate.render import (GenerateState, GenerateStreamRenderer, _TokenIds,
                                       render_generate_response)
from tests.support.bodies import BodyRun
from tests.support.normalize import normalized_text

PROMPT = [1, 22177, 1044]
GREEDY = [110374, 100574, 130901, 950]  # the tiny model's greedy continuation of PROMPT
HEAD = ('{"request_id":"*","model":"tiny","created":"*","usage":{"prompt_tokens":3,'
        '"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":null,'
        '"completion_tokens_details":null},"prompt_logprobs":null,"prompt_token_id_logprobs":null,'
        '"prompt_token_ids":null,"mm_placeholders":null,"metrics":null,"kv_transfer_params":null,'
        '"ec_transfer_params":null,')


def lists(ids, lps, ranks):
    return LogprobsLists(encode_ndarray(ids, "<i4"), encode_ndarray(lps, "<f4"),
                         encode_ndarray(ranks, "<i8"))


class Run(BodyRun):
    """One /inference/v1/generate request through the real bodies."""

    def __init__(self, ctx, body: dict) -> None:
        super().__init__(prepare_generate({"token_ids": PROMPT, **body}, ctx), ctx,
                         GenerateStreamRenderer, render_generate_response, GenerateState)

    def body(self) -> str:
        return normalized_text(self.response(), ("request_id", "created"))


def test_tokens_body(ctx):
    run = Run(ctx, {"sampling_params": {"max_tokens": 4, "temperature": 0}}).tokens(GREEDY)
    assert run.body() == HEAD % (7, 4) + (
        '"output_mode":"tokens","choices":[{"index":0,"finish_reason":"length","stop_reason":null,'
        '"token_ids":[110374,100574,130901,950],"routed_experts":null,"sampling_mask":null,'
        '"weight_versions":[{"version":"default","start":0,"end":4}],"logprobs":null}]}')
    assert all(isinstance(c.detokenizer, _TokenIds) for c in run.state.choices)


def test_text_body(ctx):
    run = Run(ctx, {"sampling_params": {"max_tokens": 4, "temperature": 0},
                    "output_mode": "text"}).tokens(GREEDY)
    assert run.body() == HEAD % (7, 4) + (
        '"output_mode":"text","choices":[{"index":0,"finish_reason":"length","stop_reason":null,'
        '"token_ids":[110374,100574,130901,950],"routed_experts":null,"sampling_mask":null,'
        '"weight_versions":[{"version":"default","start":0,"end":4}],"text":" ShaunKuChecks",'
        '"logprobs":null}]}')


def test_tokens_stream(ctx):
    run = Run(ctx, {"sampling_params": {"max_tokens": 3, "temperature": 0}, "stream": True})
    chunk = ('data: {"request_id":"*","usage":null,"output_mode":"tokens","choices":[{"index":0,'
             '"finish_reason":%s,"stop_reason":null,"token_ids":[%d],"routed_experts":null,'
             '"sampling_mask":null,"weight_versions":%s,"logprobs":null}]}\n\n')
    assert run.tokens(GREEDY[:3]).body() == (
        chunk % ("null", 110374, "null") + chunk % ("null", 100574, "null")
        + chunk % ('"length"', 130901, '[{"version":"default","start":0,"end":3}]')
        + "data: [DONE]\n\n")


def test_text_stream_with_prompt_ids_and_continuous_usage(ctx):
    run = Run(ctx, {"sampling_params": {"max_tokens": 3, "temperature": 0}, "stream": True,
                    "output_mode": "text", "return_token_ids": True,
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    usage = ('"usage":{"prompt_tokens":3,"total_tokens":%d,"completion_tokens":%d,'
             '"prompt_tokens_details":null,"completion_tokens_details":null}')
    choice = ('"choices":[{"index":0,"finish_reason":%s,"stop_reason":null,"token_ids":[%d],'
              '"routed_experts":null,"sampling_mask":null,"weight_versions":%s,"text":"%s",'
              '"logprobs":null}]}\n\n')
    assert run.tokens(GREEDY[:3]).body() == (
        'data: {"request_id":"*",' + usage % (4, 1) + ',"prompt_token_ids":[1,22177,1044],'
        '"output_mode":"text",' + choice % ("null", 110374, "null", " Shaun")
        + 'data: {"request_id":"*",' + usage % (5, 2) + ',"output_mode":"text",'
        + choice % ("null", 100574, "null", "Ku")
        + 'data: {"request_id":"*",' + usage % (6, 3) + ',"output_mode":"text",'
        + choice % ('"length"', 130901, '[{"version":"default","start":0,"end":3}]', "Checks")
        + 'data: {"request_id":"*","usage":{"prompt_tokens":3,"total_tokens":6,'
        '"completion_tokens":3},"output_mode":"text","choices":[]}\n\ndata: [DONE]\n\n')


def _logprob_steps(run):
    prompt = LogprobsTensors(
        encode_ndarray([[22177, 99409], [1044, 119720]], "int32"),
        encode_ndarray([[-12.203843116760254, -10.856186866760254],
                        [-11.57361888885498, -10.84412670135498]], "float32"),
        encode_ndarray([125884, 19539], "int64"))
    run.step([110374], new_prompt_logprobs_tensors=prompt, new_logprobs=lists(
        [[110374, 110374, 44602]], [[-10.75416374206543, -10.75416374206543,
                                     -10.85963249206543]], [1]))
    run.step([100574], 1, new_logprobs=lists(
        [[100574, 100574, 59584]], [[-10.870966911315918, -10.870966911315918,
                                     -10.917841911315918]], [1]))
    return run


PROMPT_LOGPROBS = (
    '"prompt_logprobs":[null,{"22177":{"logprob":-12.203843116760254,"rank":125884,'
    '"decoded_token":"Hello"},"99409":{"logprob":-10.856186866760254,"rank":1,'
    '"decoded_token":" roues"}},{"1044":{"logprob":-11.57361888885498,"rank":19539,'
    '"decoded_token":","},"119720":{"logprob":-10.84412670135498,"rank":1,'
    '"decoded_token":" εποχή"}}],"prompt_token_id_logprobs":null,"prompt_token_ids":[1,22177,'
    '1044],"mm_placeholders":null,"metrics":null,"kv_transfer_params":null,'
    '"ec_transfer_params":null,')


def test_logprobs_and_prompt_logprobs_tokens_body(ctx):
    run = _logprob_steps(Run(ctx, {"sampling_params": {
        "max_tokens": 2, "temperature": 0, "logprobs": 2, "prompt_logprobs": 1},
        "return_token_ids": True}))
    assert run.body() == (
        '{"request_id":"*","model":"tiny","created":"*","usage":{"prompt_tokens":3,'
        '"total_tokens":5,"completion_tokens":2,"prompt_tokens_details":null,'
        '"completion_tokens_details":null},' + PROMPT_LOGPROBS + '"output_mode":"tokens",'
        '"choices":[{"index":0,"finish_reason":"length","stop_reason":null,"token_ids":[110374,'
        '100574],"routed_experts":null,"sampling_mask":null,"weight_versions":[{"version":'
        '"default","start":0,"end":2}],"logprobs":{"content":[{"token_id":110374,"logprob":'
        '-10.75416374206543,"rank":1,"top_logprobs":[{"token_id":110374,"logprob":'
        '-10.75416374206543,"rank":1},{"token_id":44602,"logprob":-10.85963249206543,"rank":2}]},'
        '{"token_id":100574,"logprob":-10.870966911315918,"rank":1,"top_logprobs":[{"token_id":'
        '100574,"logprob":-10.870966911315918,"rank":1},{"token_id":59584,"logprob":'
        '-10.917841911315918,"rank":2}]}]}}]}')


def test_logprobs_text_body(ctx):
    run = _logprob_steps(Run(ctx, {"sampling_params": {
        "max_tokens": 2, "temperature": 0, "logprobs": 2, "prompt_logprobs": 1},
        "return_token_ids": True, "output_mode": "text"}))
    assert run.body().endswith(
        PROMPT_LOGPROBS + '"output_mode":"text","choices":[{"index":0,"finish_reason":"length",'
        '"stop_reason":null,"token_ids":[110374,100574],"routed_experts":null,'
        '"sampling_mask":null,"weight_versions":[{"version":"default","start":0,"end":2}],'
        '"text":" ShaunKu","logprobs":{"content":[{"token":" Shaun","logprob":-10.75416374206543,'
        '"bytes":[32,83,104,97,117,110],"top_logprobs":[{"token":" Shaun","logprob":'
        '-10.75416374206543,"bytes":[32,83,104,97,117,110]},{"token":" struggled","logprob":'
        '-10.85963249206543,"bytes":[32,115,116,114,117,103,103,108,101,100]}]},{"token":"Ku",'
        '"logprob":-10.870966911315918,"bytes":[75,117],"top_logprobs":[{"token":"Ku","logprob":'
        '-10.870966911315918,"bytes":[75,117]},{"token":" campeón","logprob":-10.917841911315918,'
        '"bytes":[32,99,97,109,112,101,195,179,110]}]}]}}]}')


def test_logprobs_zero_lists_the_sampled_token_in_a_text_stream(ctx):
    run = Run(ctx, {"sampling_params": {"max_tokens": 2, "temperature": 0, "logprobs": 0},
                    "stream": True, "output_mode": "text",
                    "stream_options": {"include_usage": True}})
    run.step([110374], new_logprobs=lists([[110374]], [[-10.75416374206543]], [1]))
    run.step([100574], 1, new_logprobs=lists([[100574]], [[-10.870966911315918]], [1]))
    assert run.body() == (
        'data: {"request_id":"*","usage":null,"output_mode":"text","choices":[{"index":0,'
        '"finish_reason":null,"stop_reason":null,"token_ids":[110374],"routed_experts":null,'
        '"sampling_mask":null,"weight_versions":null,"text":" Shaun","logprobs":{"content":[{'
        '"token":" Shaun","logprob":-10.75416374206543,"bytes":[32,83,104,97,117,110],'
        '"top_logprobs":[{"token":" Shaun","logprob":-10.75416374206543,"bytes":[32,83,104,97,'
        '117,110]}]}]}}]}\n\n'
        'data: {"request_id":"*","usage":null,"output_mode":"text","choices":[{"index":0,'
        '"finish_reason":"length","stop_reason":null,"token_ids":[100574],"routed_experts":null,'
        '"sampling_mask":null,"weight_versions":[{"version":"default","start":0,"end":2}],'
        '"text":"Ku","logprobs":{"content":[{"token":"Ku","logprob":-10.870966911315918,'
        '"bytes":[75,117],"top_logprobs":[{"token":"Ku","logprob":-10.870966911315918,'
        '"bytes":[75,117]}]}]}}]}\n\n'
        'data: {"request_id":"*","usage":{"prompt_tokens":3,"total_tokens":5,'
        '"completion_tokens":2},"output_mode":"text","choices":[]}\n\ndata: [DONE]\n\n')


def test_missing_sampled_logprob_gets_the_sentinel(ctx):
    run = Run(ctx, {"sampling_params": {"max_tokens": 1, "logprobs": 1}})
    run.step([5], 1, new_logprobs=lists([[7, 7]], [[float("nan"), float("-inf")]], [0]))
    assert ('"logprobs":{"content":[{"token_id":5,"logprob":-9999.0,"rank":null,'
            '"top_logprobs":[]}]}') in run.body()


def test_stop_string_text_stream_and_tokens_body(ctx):
    run = Run(ctx, {"sampling_params": {"max_tokens": 8, "temperature": 0, "stop": ["Ku"]},
                    "output_mode": "text", "stream": True}).tokens(GREEDY)
    assert run.body() == (
        'data: {"request_id":"*","usage":null,"output_mode":"text","choices":[{"index":0,'
        '"finish_reason":null,"stop_reason":null,"token_ids":[110374],"routed_experts":null,'
        '"sampling_mask":null,"weight_versions":null,"text":" Shau","logprobs":null}]}\n\n'
        'data: {"request_id":"*","usage":null,"output_mode":"text","choices":[{"index":0,'
        '"finish_reason":"stop","stop_reason":"Ku","token_ids":[100574],"routed_experts":null,'
        '"sampling_mask":null,"weight_versions":[{"version":"default","start":0,"end":2}],'
        '"text":"n","logprobs":null}]}\n\ndata: [DONE]\n\n')
    run = Run(ctx, {"sampling_params": {"max_tokens": 8, "temperature": 0, "stop": ["Ku"]}})
    run.step(GREEDY[:1]).step(GREEDY[1:])  # the stop string cuts tokens from the same step
    assert run.body() == HEAD % (5, 2) + (
        '"output_mode":"tokens","choices":[{"index":0,"finish_reason":"stop","stop_reason":"Ku",'
        '"token_ids":[110374,100574],"routed_experts":null,"sampling_mask":null,'
        '"weight_versions":[{"version":"default","start":0,"end":2}],"logprobs":null}]}')


def test_weight_version_spans(ctx):
    run = Run(ctx, {"sampling_params": {"max_tokens": 5}})
    run.step([5], version="v1").step([6, 7], version="v1").step([], version="v2")
    run.step([8], version="v2").step([9], 1, version=None).done()
    assert run.state.weight_versions(0) == [{"version": "v1", "start": 0, "end": 3},
                                            {"version": "v2", "start": 3, "end": 5}]
    assert Run(ctx, {"sampling_params": {}}).step([5], 1, version=None).done().state \
        .weight_versions(0) is None
    assert Run(ctx, {"sampling_params": {}}).step([], 2).done().state.weight_versions(0) == []  # abort


def test_n_samples_put_the_prompt_on_the_first_chunk_only(ctx):
    run = Run(ctx, {"sampling_params": {"n": 2, "max_tokens": 2, "seed": 1}, "stream": True,
                    "return_token_ids": True, "stream_options": {"include_usage": True}})
    run.step([5], index=1).step([6], index=0).step([7], 1, index=0).step([8], 1, index=1)
    events = run.body().split("\n\n")
    assert ['"prompt_token_ids":[1,22177,1044]' in e for e in events[:4]] == [
        True, False, False, False]
    assert [re.search(r'"index":(\d)', e).group(1) for e in events[:4]] == ["1", "0", "0", "1"]
    assert events[4] == ('data: {"request_id":"*","usage":{"prompt_tokens":3,"total_tokens":7,'
                         '"completion_tokens":4},"output_mode":"tokens","choices":[]}')


def test_n_samples_body_and_transfer_params(ctx):
    run = Run(ctx, {"sampling_params": {"n": 2, "max_tokens": 2, "seed": 1}})
    run.step([5], index=1).step([7, 8], 0, index=0, stop_reason=8)  # 0: STOP
    run.step([6], 1, index=1, kv_transfer_params={"remote": 1})  # 1: LENGTH
    body = run.body()
    assert '"usage":{"prompt_tokens":3,"total_tokens":7,"completion_tokens":4,' in body
    # The engine's transfer results come with the last sample to finish.
    assert '"kv_transfer_params":{"remote":1},"ec_transfer_params":null,' in body
    assert ('"choices":[{"index":0,"finish_reason":"stop","stop_reason":8,"token_ids":[7,8],'
            in body)
    assert '{"index":1,"finish_reason":"length","stop_reason":null,"token_ids":[5,6],' in body


def test_detokenize_off_leaves_decoded_tokens_null(ctx):
    run = Run(ctx, {"sampling_params": {"max_tokens": 1, "detokenize": False,
                                        "prompt_logprobs": 0}})
    prompt = LogprobsTensors(encode_ndarray([[22177], [1044]], "int32"),
                             encode_ndarray([[-1.5], [-2.5]], "float32"),
                             encode_ndarray([3, 4], "int64"))
    run.step([5], 1, new_prompt_logprobs_tensors=prompt)
    assert ('"prompt_logprobs":[null,{"22177":{"logprob":-1.5,"rank":3,"decoded_token":null}},'
            '{"1044":{"logprob":-2.5,"rank":4,"decoded_token":null}}]') in run.body()


def test_python_floats_in_the_body(ctx):
    run = Run(ctx, {"sampling_params": {"max_tokens": 1, "logprobs": 0}})
    run.step([5], 1, new_logprobs=lists([[5]], [[-1.0000000116860974e-07]], [1]))
    assert '"logprob":-1.0000000116860974e-07,"rank":1' in run.body()
