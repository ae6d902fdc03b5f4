"""Bad input that once made greenfront answer 500: vLLM 0.32's own answer, byte for byte.

Both frontends serve from the engine-core simulator; every case is sent to both and the status
and body must be equal. The cases are two former 500s (a chat content part whose text is a
boolean or a number; /detokenize ids past 2^32 - 1, floats standing for such ids included) and
their neighbours (parts that are not objects, per role; content given as an object).
"""
from __future__ import annotations

import pytest
import requests

from tests.integration.harness import GreenfrontServer
from tests.interop.peers import requires_peers, vllm_frontend_on_simulator

pytestmark = requires_peers

SIM = ["--max-model-len", "2048", "--output-mode", "echo"]


@pytest.fixture(scope="module")
def frontends(tmp_path_factory, model_dir):
    with vllm_frontend_on_simulator(str(tmp_path_factory.mktemp("vllm-bad-input"))) as theirs:
        with GreenfrontServer(model_dir, sim_args=" ".join(SIM)) as ours:
            yield ours, theirs


def _messages(*messages: dict) -> dict:
    return {"messages": list(messages)}


USER = {"role": "user", "content": "hi"}
CASES = [
    ("/tokenize", _messages({"role": "user", "content": [{"type": "text", "text": True}]})),
    ("/tokenize", _messages({"role": "user", "content": [{"type": "text", "text": 5}]})),
    ("/tokenize", _messages({"role": "user", "content": [{"type": "text", "text": 2.5}]})),
    ("/tokenize", _messages({"role": "user", "content": True})),
    ("/tokenize", _messages({"role": "user", "content": 7})),
    ("/tokenize", _messages({"role": "user", "content": [True]})),
    ("/tokenize", _messages({"role": "user", "content": [None]})),
    ("/tokenize", _messages({"role": "user", "content": {"a": 1}})),
    ("/tokenize", _messages({"role": "system", "content": [{"type": "text", "text": 5}]})),
    ("/tokenize", _messages(USER, {"role": "assistant", "content": [3]})),
    ("/tokenize", _messages({"role": "tool", "tool_call_id": "c", "content": [1.5]})),
    ("/tokenize", _messages({"role": "developer", "content": [[1] * 30]})),
    ("/v1/chat/completions", dict(_messages(
        {"role": "user", "content": [{"type": "text", "text": False}]}), max_tokens=2)),
    ("/detokenize", {"tokens": [2 ** 31]}),
    ("/detokenize", {"tokens": [2 ** 32]}),
    ("/detokenize", {"tokens": [1, 4294967296.0]}),
    ("/detokenize", {"tokens": [2 ** 63 - 1]}),
    ("/detokenize", {"tokens": [2 ** 63]}),
]


@pytest.mark.parametrize("path,body", CASES, ids=[f"{i}{p}" for i, (p, _) in enumerate(CASES)])
def test_answers_match_vllms_python_frontend(frontends, path, body):
    ours, theirs = (requests.post(stack.url + path, json=body, timeout=60) for stack in frontends)
    assert ours.status_code < 500
    assert (ours.status_code, ours.content) == (theirs.status_code, theirs.content)
