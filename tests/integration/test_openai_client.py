"""The official ``openai`` client against a real gunicorn + simulator deployment."""
from __future__ import annotations

import openai
import pytest


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def test_models_lists_the_served_name(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny"]


def test_completion_echoes_the_prompt_tokens(client):
    # The simulator in echo mode repeats the prompt's tokens (after BOS): greedy-like and exact.
    out = client.completions.create(model="tiny", prompt="The capital of France is",
                                    max_tokens=5, temperature=0)
    choice = out.choices[0]
    assert choice.text == "The capital of France is"
    assert choice.finish_reason == "length"
    assert out.usage.prompt_tokens == 6
    assert out.usage.completion_tokens == 5
    assert out.usage.total_tokens == 11
    assert out.id.startswith("cmpl-")
    assert out.model == "tiny"


def test_completion_stream_concatenates_to_the_same_text(client):
    chunks = list(client.completions.create(model="tiny", prompt="The capital of France is",
                                            max_tokens=5, temperature=0, stream=True))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == "The capital of France is"
    assert chunks[-1].choices[0].finish_reason == "length"
    assert len({c.id for c in chunks}) == 1


def test_completion_stream_with_usage(client):
    chunks = list(client.completions.create(
        model="tiny", prompt="Hello world", max_tokens=3, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 3
    assert chunks[-1].usage.prompt_tokens == 3


def test_completion_stop_string_cuts_the_text(client):
    out = client.completions.create(model="tiny", prompt="The capital of France is",
                                    max_tokens=10, temperature=0, stop=[" France"])
    assert out.choices[0].text == "The capital of"
    assert out.choices[0].finish_reason == "stop"


def test_completion_token_id_prompt_and_list_of_prompts(client):
    out = client.completions.create(model="tiny", prompt=["Hello world", "The capital"],
                                    max_tokens=2, temperature=0)
    assert [c.index for c in out.choices] == [0, 1]
    assert out.choices[0].text == "Hello world"
    assert out.choices[1].text == "The capital"
    ids = client.completions.create(model="tiny", prompt=[1, 22177, 4304], max_tokens=2,
                                    temperature=0)
    assert ids.choices[0].text == "Hello world"


def test_chat_completion(client):
    out = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=4,
        temperature=0)
    msg = out.choices[0].message
    assert msg.role == "assistant"
    # echo of [INST]Say hi[/INST]: specials are skipped when detokenizing.
    assert msg.content == "Say hi"
    assert out.choices[0].finish_reason == "length"
    assert out.usage.prompt_tokens == 5
    assert out.id.startswith("chatcmpl-")


def test_chat_completion_stream(client):
    chunks = list(client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=4,
        temperature=0, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Say hi"
    finals = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finals[-1] == "length"
    assert chunks[-1].usage.completion_tokens == 4


def test_chat_ends_on_eos(client):
    out = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "one two three four"}],
        max_tokens=50, temperature=0, extra_body={"vllm_xargs": {"sim_eos_after": 3}})
    assert out.choices[0].finish_reason == "stop"
    assert out.usage.completion_tokens == 3


def test_metrics_count_requests_and_show_engine_stats(client, server):
    import requests
    from tests.integration.harness import wait_for

    client.completions.create(model="tiny", prompt="Hello world", max_tokens=2, temperature=0)
    # vLLM's labels; counts reach the scrape within GREENFRONT_METRICS_FLUSH_INTERVAL.
    success = 'vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"}'
    assert wait_for(lambda: success + " 0.0" not in requests.get(
        server.url + "/metrics", timeout=10).text)
    text = requests.get(server.url + "/metrics", timeout=10).text
    assert success in text
    assert 'vllm:num_requests_running{engine="0",model_name="tiny"}' in text
    assert "vllm:generation_tokens_total" in text


def test_greedy_completions_repeat_and_sampled_ones_differ(client):
    """The simulator samples like an engine: argmax repeats for a prompt, sampling does not."""
    def text(prompt: str, **kwargs) -> str:
        return client.completions.create(
            model="tiny", prompt=prompt, max_tokens=8, extra_body={
                "vllm_xargs": {"sim_output_mode": "random"}}, **kwargs).choices[0].text

    greedy = text("Once upon a time", temperature=0)
    assert text("Once upon a time", temperature=0) == greedy
    assert text("Twice upon a time", temperature=0) != greedy
    assert text("Once upon a time", temperature=1) != text("Once upon a time", temperature=1)


PREFILL_REQUEST = {"do_remote_decode": True, "do_remote_prefill": False,
                   "remote_engine_id": None, "remote_block_ids": None, "remote_host": None,
                   "remote_port": None}


def test_kv_transfer_params_of_a_prefill_request_are_returned(client):
    """A P/D proxy's prefill request: the engine's KV connector answer (the simulator answers
    as vLLM's NIXL connector does) comes back in ``kv_transfer_params`` of completions and
    chat, for the first prompt; a request without them gets null."""
    out = client.completions.create(model="tiny", prompt=[[1, 5, 6, 7] * 5, [1, 8]],
                                    max_tokens=1, extra_body={
                                        "kv_transfer_params": PREFILL_REQUEST})
    params = out.model_extra["kv_transfer_params"]
    assert params["do_remote_prefill"] is True and params["do_remote_decode"] is False
    assert params["remote_block_ids"] == [[0, 1]]  # 20 prompt tokens in 16-token blocks
    assert params["remote_num_tokens"] == 20 and params["remote_engine_id"] == "greenfront-sim-0"
    assert params["remote_request_id"].startswith(out.id)
    chat = client.chat.completions.create(
        model="tiny", max_tokens=1, messages=[{"role": "user", "content": "Hi"}],
        extra_body={"kv_transfer_params": PREFILL_REQUEST})
    assert chat.model_extra["kv_transfer_params"]["do_remote_prefill"] is True
    plain = client.completions.create(model="tiny", prompt="Hi", max_tokens=1)
    assert plain.model_extra["kv_transfer_params"] is None
