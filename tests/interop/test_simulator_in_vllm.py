"""The simulator is a faithful engine: vLLM's own Python frontend serves from it.

vLLM's frontend is started with no local engine (``--data-parallel-size-local 0``) and binds the
handshake ROUTER; the simulator joins it exactly as ``vllm serve --headless`` would.
"""
from __future__ import annotations

import openai
import pytest

from tests.interop.peers import requires_peers
from tests.interop.peers import vllm_frontend_on_simulator as on_simulator

pytestmark = requires_peers


@pytest.fixture(scope="module")
def vllm_frontend_on_simulator(tmp_path_factory):
    logs = str(tmp_path_factory.mktemp("vllm-on-sim"))
    with on_simulator(logs, ["--disable-log-stats"]) as frontend:
        yield frontend


def test_vllm_python_frontend_completes_from_the_simulator(vllm_frontend_on_simulator):
    client = openai.OpenAI(base_url=vllm_frontend_on_simulator.url + "/v1", api_key="x",
                           max_retries=0)
    out = client.completions.create(model="tiny", prompt="The capital of France is",
                                    max_tokens=5, temperature=0)
    assert out.choices[0].text == "The capital of France is"
    assert out.choices[0].finish_reason == "length"


def test_vllm_python_frontend_streams_a_chat_from_the_simulator(vllm_frontend_on_simulator):
    client = openai.OpenAI(base_url=vllm_frontend_on_simulator.url + "/v1", api_key="x",
                           max_retries=0)
    chunks = list(client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=4,
        temperature=0, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Say hi"
    assert chunks[-1].choices[0].finish_reason == "length"
