"""``kv_transfer_params`` in completions and chat answers: what vLLM 0.32's Python frontend
answers, on the same simulator.

A P/D proxy sends the prefill node ``{"do_remote_decode": true, ...}`` and forwards what comes
back to the decode node. Both frontends serve from greenfront's simulator, which answers such a
request as vLLM's NIXL connector does (``engine.sim.request.kv_transfer_answer``); the two
answers' ``kv_transfer_params`` must be equal but for the engine request id (each frontend
names its own) and, for chat, the prompt's size (the models' chat templates differ).
"""
from __future__ import annotations

import pytest
import requests

from tests.integration.harness import GreenfrontServer
from tests.interop.peers import requires_peers, vllm_frontend_on_simulator

pytestmark = requires_peers

SIM = ["--max-model-len", "2048", "--output-mode", "echo"]
PREFILL = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
           "remote_block_ids": None, "remote_host": None, "remote_port": None}


@pytest.fixture(scope="module")
def frontends(tmp_path_factory, model_dir):
    with vllm_frontend_on_simulator(str(tmp_path_factory.mktemp("vllm-kv")), sim_args=SIM[2:]
                                    ) as theirs:
        with GreenfrontServer(model_dir, sim_args=" ".join(SIM)) as ours:
            yield ours, theirs


def _params(stack, path: str, body: dict) -> dict | None:
    resp = requests.post(stack.url + path, json={"model": "tiny", **body}, timeout=120)
    assert resp.status_code == 200, resp.text
    return resp.json()["kv_transfer_params"]


@pytest.mark.parametrize("path, body, sized", [
    ("/v1/completions", {"prompt": [1, 5, 6, 7] * 9, "max_tokens": 1}, True),
    ("/v1/completions", {"prompt": [[1, 5, 6, 7] * 5, [1, 8]], "max_tokens": 1}, True),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                              "max_tokens": 1}, False),
])
def test_kv_transfer_params_equal_vllms(frontends, path, body, sized):
    ours, theirs = (_params(stack, path, {**body, "kv_transfer_params": PREFILL})
                    for stack in frontends)
    assert ours is not None and theirs is not None
    masked = {"remote_request_id"} | (set() if sized else {"remote_block_ids",
                                                           "remote_num_tokens"})
    assert {k: v for k, v in ours.items() if k not in masked} == {
        k: v for k, v in theirs.items() if k not in masked}
    assert set(ours) == set(theirs)


def test_without_a_transfer_request_both_answer_null(frontends):
    assert [_params(stack, "/v1/completions", {"prompt": "Hi", "max_tokens": 1})
            for stack in frontends] == [None, None]
