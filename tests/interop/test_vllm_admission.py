"""Admission limits: greenfront's refusal equals vLLM 0.32's (status, body), beside it.

Both frontends serve from greenfront's simulator with ``--max-num-queued-reqs 1`` (greenfront:
``GREENFRONT_MAX_NUM_QUEUED_REQS``); while one slow stream holds the only slot, a second request
is refused by both with the same 503 body. (greenfront adds ``Retry-After``; vLLM sends none.)
"""
from __future__ import annotations

import pytest
import requests

from tests.integration.harness import GreenfrontServer
from tests.integration.test_admission import _SlowStream
from tests.interop.peers import requires_peers, vllm_frontend_on_simulator

pytestmark = requires_peers


@pytest.fixture(scope="module")
def frontends(tmp_path_factory, model_dir):
    with vllm_frontend_on_simulator(str(tmp_path_factory.mktemp("vllm-admission")),
                                    extra=["--max-num-queued-reqs", "1"],
                                    sim_args=["--output-mode", "echo"]) as theirs:
        with GreenfrontServer(model_dir, sim_args="--max-model-len 2048 --output-mode echo",
                              env={"GREENFRONT_MAX_NUM_QUEUED_REQS": "1"}) as ours:
            yield ours, theirs


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_over_the_limit_gets_vllms_503(frontends, stream):
    answers = []
    for stack in frontends:
        held = _SlowStream(stack.url)
        try:
            assert held.started.wait(120)
            answers.append(requests.post(stack.url + "/v1/completions", timeout=60, json={
                "model": "tiny", "prompt": [1, 5, 6], "max_tokens": 1, "stream": stream}))
        finally:
            held.close()
    ours, theirs = answers
    assert ours.status_code == 503 and ours.headers["Retry-After"] == "1"
    assert (ours.status_code, ours.content) == (theirs.status_code, theirs.content)
