"""A real ``vllm serve --headless`` engine joins a standalone greenfront (gunicorn) through its
handshake address; greedy output is exactly what vLLM's own frontend returns (docs/text-parity.md §6.4)."""
from __future__ import annotations

import os

import openai
import pytest

from tests.support.processes import free_port_block
from tests.integration.harness import GreenfrontServer
from tests.interop.peers import MODEL, SERVE_ARGS, VllmProcess, requires_peers

pytestmark = requires_peers


@pytest.fixture(scope="module")
def greenfront_with_headless_engine(tmp_path_factory):
    logs = tmp_path_factory.mktemp("vllm-headless")
    rpc_port = free_port_block(3)  # the handshake port, then the worker's two
    server = GreenfrontServer(MODEL, env={
        "GREENFRONT_ENGINE": "external",
        "GREENFRONT_HANDSHAKE_ADDRESS": f"tcp://127.0.0.1:{rpc_port}"})
    engine = VllmProcess(["--headless"] + SERVE_ARGS + [
        "--disable-log-stats", "--data-parallel-size", "1", "--data-parallel-size-local", "1",
        "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", str(rpc_port)],
        str(logs / "engine.log"))
    try:
        server.start(timeout=300)
        yield server
    finally:
        server.stop()
        engine.kill()


def test_headless_vllm_engine_behind_standalone_greenfront(greenfront_with_headless_engine):
    client = openai.OpenAI(base_url=greenfront_with_headless_engine.url + "/v1", api_key="x",
                           max_retries=0)
    out = client.completions.create(model="tiny", prompt="The capital of France is",
                                    max_tokens=8, temperature=0)
    assert out.choices[0].text == ":** нельзя bernKey Execut\ufffdKey Execut"
    assert out.usage.prompt_tokens == 6 and out.usage.completion_tokens == 8
    chat = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=8,
        temperature=0, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in chat if c.choices)
    assert text == "եյিযipleÜberർinomború Literatura"
    assert os.path.exists(MODEL)
