"""vLLM 0.32 frontend options, greenfront beside vLLM's own Python frontend (docs/options.md §2).

vLLM's Python frontend runs on a greenfront simulator with ``--return-tokens-as-token-ids
--exclude-tools-when-tool-choice-none --sse-keep-alive-interval 1 ...``; greenfront gets the same
options on both launch paths: ``greenfront serve`` on its command line, and ``--args-json`` as
``vllm serve`` hands it (the launch harness plays ``vllm serve``); per-request metrics and
custom histogram buckets too; keep-alives while a streamed beam search runs. Every simulator
echoes the prompt, so the answers can be compared field by field.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import requests

from tests.integration.harness import ROOT
from tests.integration.launch_harness import LaunchedFrontend
from tests.interop.peers import MODEL, requires_peers, vllm_frontend_on_simulator
from tests.support.processes import free_port, reap, wait_healthy

pytestmark = requires_peers

FLAGS = ["--return-tokens-as-token-ids", "--exclude-tools-when-tool-choice-none",
         "--sse-keep-alive-interval", "1", "--enable-per-request-metrics",
         "--custom-histogram-buckets", '{"request_latency": [0.25, 2.5]}']
SIM = ["--output-mode", "echo", "--itl-ms", "2", "--vocab-size", "131072"]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
HI = [{"role": "user", "content": "Hi there, how are you"}]


@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    with vllm_frontend_on_simulator(str(tmp_path_factory.mktemp("opts-vllm")), extra=FLAGS,
                                    sim_args=SIM) as frontend:
        yield frontend.url


@pytest.fixture(scope="module", params=["greenfront-serve", "args-json"])
def greenfront(request, tmp_path_factory):
    if request.param == "args-json":
        fe = LaunchedFrontend(MODEL, sim_args=SIM, args={
            "return_tokens_as_token_ids": True, "exclude_tools_when_tool_choice_none": True,
            "sse_keep_alive_interval": 1, "max_model_len": 2048,
            "enable_per_request_metrics": True,
            "custom_histogram_buckets": {"request_latency": [0.25, 2.5]}})
        try:
            yield fe.wait_healthy().url
        finally:
            fe.stop()
        return
    port = free_port()
    log = open(os.path.join(str(tmp_path_factory.mktemp("opts-gf")), "serve.log"), "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "launch", "serve", MODEL, "--host", "127.0.0.1", "--port",
         str(port), "--served-model-name", "tiny", "--max-model-len", "2048", *FLAGS],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env=dict(os.environ, GREENFRONT_SIM_ARGS=" ".join(SIM), GREENFRONT_WORKERS="1"))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url + "/health", proc, 120, lambda: "", name="greenfront serve")
        yield url
    finally:
        reap(proc, grace=5)
        log.close()


def post(url: str, path: str, body: dict) -> dict:
    r = requests.post(url + path, json={"model": "tiny", **body}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


CASES = {
    "completion-logprobs": ("/v1/completions", {"prompt": "Hello world again", "max_tokens": 3,
                                                "logprobs": 2, "temperature": 0}),
    "completion-request-false-wins": ("/v1/completions", {
        "prompt": "Hello world again", "max_tokens": 3, "logprobs": 2, "temperature": 0,
        "return_tokens_as_token_ids": False}),
    "chat-logprobs": ("/v1/chat/completions", {"messages": HI, "max_tokens": 3, "logprobs": True,
                                               "top_logprobs": 2, "temperature": 0}),
    "chat-tool-choice-none": ("/v1/chat/completions", {"messages": HI, "max_tokens": 2,
                                                       "tools": TOOLS, "tool_choice": "none"}),
    "chat-tool-choice-auto-tokenize": ("/tokenize", {"messages": HI, "tools": TOOLS}),
    "chat-metrics": ("/v1/chat/completions", {"messages": HI, "max_tokens": 4}),
    "completion-metrics-n2": ("/v1/completions", {"prompt": "Hello", "max_tokens": 2, "n": 2}),
}


def _part(case: str, answer: dict) -> object:
    if case.endswith("metrics") or case.endswith("metrics-n2"):
        # timings differ run to run: which figures are there, and which are null
        metrics = answer["metrics"]
        return None if metrics is None else {k: v is None for k, v in metrics.items()}
    if case.startswith("completion"):
        return answer["choices"][0]["text"], answer["choices"][0]["logprobs"]
    if case == "chat-logprobs":
        return answer["choices"][0]["message"]["content"], answer["choices"][0]["logprobs"]
    if case == "chat-tool-choice-none":
        return answer["usage"]["prompt_tokens"]
    return answer["count"], answer["tokens"]


@pytest.mark.parametrize("case", list(CASES))
def test_same_answer_as_vllm(vllm, greenfront, case):
    path, body = CASES[case]
    theirs, ours = _part(case, post(vllm, path, body)), _part(case, post(greenfront, path, body))
    assert ours == theirs


def _stream(url: str) -> str:
    body = {"model": "tiny", "messages": HI, "max_tokens": 2, "stream": True,
            "vllm_xargs": {"sim_ttft_ms": 2500}}
    r = requests.post(url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200
    return r.text


def test_custom_buckets_in_metrics(vllm, greenfront):
    def bounds(url: str) -> list[str]:
        post(url, "/v1/completions", {"prompt": "Hello", "max_tokens": 2})
        text = requests.get(url + "/metrics", timeout=30).text
        return sorted(set(re.findall(
            r'vllm:e2e_request_latency_seconds_bucket\{[^}]*le="([^"]+)"', text)))
    assert bounds(greenfront) == bounds(vllm) == ["+Inf", "0.25", "2.5"]


def test_keep_alive_comments_while_waiting(vllm, greenfront):
    for text in (_stream(vllm), _stream(greenfront)):
        head = text.split("data: ", 1)[0]
        assert ": keep-alive\n\n" in head, text[:300]
        assert text.rstrip().endswith("data: [DONE]")


def _beam_stream(url: str) -> str:
    # Hundreds of one-token steps: seconds in which the stream writer has nothing to send.
    body = {"model": "tiny", "messages": HI, "max_tokens": 600, "n": 2, "stream": True,
            "use_beam_search": True, "ignore_eos": True}
    r = requests.post(url + "/v1/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.text


def test_keep_alive_comments_while_a_streamed_beam_search_runs(vllm, greenfront):
    for text in (_beam_stream(vllm), _beam_stream(greenfront)):
        head, _, rest = text.partition("data: ")
        assert head and set(head.split("\n\n")) <= {": keep-alive", ""}, text[:300]
        assert rest and ": keep-alive" not in rest      # none once the beams are sent
        assert text.rstrip().endswith("data: [DONE]")
