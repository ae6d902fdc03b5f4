"""vLLM frontend options on ``greenfront serve`` (docs/options.md §2), against the simulator:
``--return-tokens-as-token-ids``, ``--exclude-tools-when-tool-choice-none``,
``--sse-keep-alive-interval``, ``--uds``. Their parity with vLLM's Python frontend is
``tests/interop/test_frontend_options_parity.py``.
"""
from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys

import pytest
import requests

from tests.integration.harness import ROOT
from tests.support.processes import free_port, reap, wait_healthy
from tests.support.waiting import wait_for

FLAGS = ["--return-tokens-as-token-ids", "--exclude-tools-when-tool-choice-none",
         "--sse-keep-alive-interval", "1",
         "--custom-histogram-buckets", '{"request_latency": [0.25, 2.5]}',
         "--enable-per-request-metrics"]
SIM = "--output-mode echo --itl-ms 2 --ttft-ms 5"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
HI = [{"role": "user", "content": "Hi there"}]


def _serve(model_dir: str, log_path: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "launch", "serve", model_dir, "--served-model-name", "tiny",
         *args], cwd=ROOT, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT,
        start_new_session=True, env=dict(os.environ, GREENFRONT_SIM_ARGS=SIM,
                                         GREENFRONT_WORKERS="1"))


@pytest.fixture(scope="module")
def url(marker_model_dir, tmp_path_factory):
    # The marker-token model's template renders tools (the plain test model's ignores them).
    port = free_port()
    log = str(tmp_path_factory.mktemp("opts") / "serve.log")
    proc = _serve(marker_model_dir, log, "--host", "127.0.0.1", "--port", str(port), *FLAGS)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, 60, lambda: open(log).read())
        yield f"http://127.0.0.1:{port}"
    finally:
        reap(proc, grace=5)


def _post(url: str, path: str, body: dict) -> dict:
    r = requests.post(url + path, json={"model": "tiny", **body}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_logprob_tokens_are_token_ids_unless_the_request_says_no(url):
    body = {"prompt": "Hello world", "max_tokens": 2, "logprobs": 1}
    tokens = _post(url, "/v1/completions", body)["choices"][0]["logprobs"]["tokens"]
    assert tokens and all(t.startswith("token_id:") for t in tokens)
    body["return_tokens_as_token_ids"] = False
    tokens = _post(url, "/v1/completions", body)["choices"][0]["logprobs"]["tokens"]
    assert not any(t.startswith("token_id:") for t in tokens)
    chat = _post(url, "/v1/chat/completions", {"messages": HI, "max_tokens": 2,
                                                "logprobs": True, "top_logprobs": 1})
    content = chat["choices"][0]["logprobs"]["content"]
    assert all(c["token"].startswith("token_id:") for c in content)
    # The chosen token's bytes stay those of its text, as vLLM writes them.
    assert all(c["bytes"] != list(c["token"].encode()) for c in content)


def test_tool_choice_none_renders_no_tools_but_tokenize_does(url):
    def prompt_tokens(**extra) -> int:
        return _post(url, "/v1/chat/completions",
                     {"messages": HI, "max_tokens": 1, **extra})["usage"]["prompt_tokens"]
    plain = prompt_tokens()
    assert prompt_tokens(tools=TOOLS, tool_choice="none") == plain
    assert _post(url, "/tokenize", {"messages": HI, "tools": TOOLS})["count"] > plain


def test_keep_alive_comments_while_a_stream_waits(url):
    body = {"model": "tiny", "messages": HI, "max_tokens": 2, "stream": True,
            "vllm_xargs": {"sim_ttft_ms": 2500}}
    text = requests.post(url + "/v1/chat/completions", json=body, timeout=30).text
    assert ": keep-alive\n\n" in text.split("data: ", 1)[0]
    assert text.rstrip().endswith("data: [DONE]")
    # Not on /inference/v1/generate (vLLM sends them on chat and completions only).
    r = requests.post(url + "/inference/v1/generate", timeout=30, json={
        "token_ids": [1, 2, 3], "stream": True,
        "sampling_params": {"max_tokens": 2, "extra_args": {"sim_ttft_ms": 1500}}})
    assert r.status_code == 200 and "keep-alive" not in r.text


def test_keep_alive_comments_while_a_streamed_beam_search_runs(url):
    # Hundreds of steps of one-token requests (5 ms each at least): seconds without a chunk.
    body = {"model": "tiny", "messages": HI, "max_tokens": 600, "n": 2, "stream": True,
            "use_beam_search": True, "ignore_eos": True}
    text = requests.post(url + "/v1/chat/completions", json=body, timeout=120).text
    head, _, rest = text.partition("data: ")
    assert head and set(head.split("\n\n")) <= {": keep-alive", ""}
    assert rest and ": keep-alive" not in rest
    assert text.rstrip().endswith("data: [DONE]")


def test_custom_histogram_buckets_replace_a_familys_bounds(url):
    _post(url, "/v1/completions", {"prompt": "Hello", "max_tokens": 2})
    text = requests.get(url + "/metrics", timeout=30).text
    bounds = re.findall(r'vllm:e2e_request_latency_seconds_bucket\{[^}]*le="([^"]+)"', text)
    assert sorted(set(bounds)) == ["+Inf", "0.25", "2.5"]
    # A family not named keeps vLLM's defaults.
    assert 'vllm:time_to_first_token_seconds_bucket{' in text
    assert len(set(re.findall(r'vllm:time_to_first_token_seconds_bucket\{[^}]*le="([^"]+)"',
                              text))) > 3


METRIC_KEYS = {"time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms",
               "tokens_per_second", "speculative_decoding"}


def test_per_request_metrics(url):
    for path, body in (("/v1/chat/completions", {"messages": HI}),
                       ("/v1/completions", {"prompt": "Hello world"})):
        metrics = _post(url, path, {**body, "max_tokens": 4})["metrics"]
        assert set(metrics) == METRIC_KEYS, metrics
        assert metrics["speculative_decoding"] is None
        assert all(isinstance(metrics[k], float) and metrics[k] >= 0
                   for k in METRIC_KEYS - {"speculative_decoding"}), metrics
        # Several samples: the figures would belong to one of them only.
        assert _post(url, path, {**body, "max_tokens": 2, "n": 2})["metrics"] is None
    r = requests.post(url + "/v1/chat/completions", timeout=30, json={
        "model": "tiny", "messages": HI, "max_tokens": 3, "stream": True,
        "stream_options": {"include_usage": True}})
    chunks = [json.loads(line[6:]) for line in r.text.splitlines()
              if line.startswith("data: {")]
    assert "metrics" in chunks[-1] and chunks[-1]["choices"] == []
    assert set(chunks[-1]["metrics"]) <= METRIC_KEYS - {"speculative_decoding"}
    assert "time_to_first_token_ms" in chunks[-1]["metrics"]
    assert all("metrics" not in c for c in chunks[:-1])


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def test_uds_serves_on_the_unix_socket_only(model_dir, tmp_path):
    path, port = str(tmp_path / "gf.sock"), free_port()
    log = str(tmp_path / "serve.log")
    proc = _serve(model_dir, log, "--uds", path, "--port", str(port))
    try:
        def answer() -> tuple[int, dict] | None:
            try:
                conn = _UnixConnection(path)
                conn.request("POST", "/v1/completions", json.dumps(
                    {"prompt": "Hello", "max_tokens": 2}), {"Content-Type": "application/json"})
                resp = conn.getresponse()
                return resp.status, json.loads(resp.read())
            except (OSError, ValueError):
                return None
        assert wait_for(lambda: answer() is not None and answer()[0] == 200, timeout=60), \
            open(log).read()[-3000:]
        assert answer()[1]["object"] == "text_completion"
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        reap(proc, grace=5)
