"""/inference/v1/generate: greenfront's bytes against vLLM 0.32's own Python frontend.

Both frontends serve from the engine-core simulator in echo mode (deterministic outputs and
logprobs, seconds to start instead of a model load), so any difference is the frontends'.
vLLM's frontend registers the endpoint only with ``--enable-scale-out`` (without it the route
answers 403); greenfront serves it always. ``request_id`` and ``created`` vary and are masked.
"""
from __future__ import annotations

import re

import pytest
import requests

from tests.integration.harness import GreenfrontServer
from tests.interop.peers import requires_peers, vllm_frontend_on_simulator

pytestmark = requires_peers

PATH = "/inference/v1/generate"
SIM = ["--max-model-len", "2048", "--output-mode", "echo"]
_VARYING = re.compile(rb'"(request_id|created)":("[^"]*"|\d+)')


def _normalized(body: bytes) -> bytes:
    return _VARYING.sub(rb'"\1":"*"', body)


@pytest.fixture(scope="module")
def frontends(tmp_path_factory, model_dir):
    logs = str(tmp_path_factory.mktemp("vllm-generate"))
    with vllm_frontend_on_simulator(logs, ["--enable-scale-out"]) as theirs:
        with GreenfrontServer(model_dir, sim_args=" ".join(SIM)) as ours:
            yield ours, theirs


PROMPT = [1, 22177, 1044, 1307, 5498]
BODIES = [
    {"token_ids": PROMPT, "sampling_params": {"max_tokens": 6}},
    {"token_ids": PROMPT, "sampling_params": {"max_tokens": 6}, "output_mode": "text",
     "return_token_ids": True},
    {"token_ids": PROMPT, "sampling_params": {"max_tokens": 4, "logprobs": 2,
                                              "prompt_logprobs": 1}},
    {"token_ids": PROMPT, "sampling_params": {"max_tokens": 4, "logprobs": 0},
     "output_mode": "text"},
    {"token_ids": PROMPT, "sampling_params": {"max_tokens": 9, "stop": [" ofHello"]},
     "output_mode": "text"},
    {"token_ids": PROMPT, "sampling_params": {"max_tokens": 9, "stop_token_ids": [5498]}},
    {"token_ids": PROMPT, "sampling_params": {"max_tokens": 3, "n": 2, "seed": 1}},
    {"token_ids": PROMPT, "sampling_params": {"temperature": 0, "max_tokens": 2,
                                              "detokenize": False}, "request_id": "r1"},
]
STREAMS = [
    {"token_ids": PROMPT, "sampling_params": {"max_tokens": 4}},
    {"token_ids": PROMPT, "sampling_params": {"max_tokens": 4, "logprobs": 1},
     "output_mode": "text", "return_token_ids": True,
     "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"token_ids": PROMPT, "sampling_params": {"max_tokens": 9, "stop": [" ofHello"]},
     "output_mode": "text", "stream_options": {"include_usage": True}},
]
ERRORS = [
    {"token_ids": PROMPT},
    {"token_ids": [], "sampling_params": {}},
    {"token_ids": [1, -1], "sampling_params": {"max_tokens": "x"}, "output_mode": "words"},
    {"token_ids": [1, 10 ** 9], "sampling_params": {}},
    {"token_ids": PROMPT, "sampling_params": {"temperature": 3}},
    {"token_ids": PROMPT, "sampling_params": {"n": 2, "temperature": 0}},
    {"token_ids": PROMPT, "sampling_params": {"detokenize": False}, "output_mode": "text"},
    {"token_ids": PROMPT, "sampling_params": {"logprobs": 50}},
    {"token_ids": PROMPT, "sampling_params": {}, "model": "nope"},
    {"token_ids": PROMPT, "sampling_params": {}, "cache_salt": "a@b"},
    {"token_ids": [7] * 2048, "sampling_params": {}},
]


def _both(frontends, body):
    return [requests.post(stack.url + PATH, json=body, timeout=60) for stack in frontends]


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_bodies_match_vllms_python_frontend(frontends, body):
    a, b = _both(frontends, body)
    assert a.status_code == b.status_code == 200, (a.text, b.text)
    assert _normalized(a.content) == _normalized(b.content)


@pytest.mark.parametrize("body", STREAMS, ids=range(len(STREAMS)))
def test_streams_match_vllms_python_frontend(frontends, body):
    a, b = _both(frontends, dict(body, stream=True))
    assert a.status_code == b.status_code == 200, (a.text, b.text)
    assert _normalized(a.content) == _normalized(b.content)
    assert a.content.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("body", ERRORS, ids=range(len(ERRORS)))
def test_errors_match_vllms_python_frontend(frontends, body):
    a, b = _both(frontends, body)
    assert a.status_code == b.status_code and a.status_code >= 400, (a.text, b.text)
    assert a.content == b.content
