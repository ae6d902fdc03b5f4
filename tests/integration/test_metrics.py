"""/metrics: vLLM's families, counted for the whole deployment whichever worker answers.

Two gunicorn workers, every request and every scrape on a fresh connection (so the kernel spreads
them over both workers): each scrape reports exactly what was sent. Then the queries of vLLM
production-stack's Grafana dashboard (helm/dashboards/vllm-model-metrics-dashboard.json), written
down in ``DASHBOARD``, are evaluated over two scrapes and must each return data.
"""
from __future__ import annotations

import json
import math
import time

import pytest
import requests

from tests.integration.harness import GreenfrontServer, wait_for
from tests.integration.promql import Evaluator, samples

#: (panel, PromQL) of production-stack's vLLM dashboard, with ``$model_name`` filled in. The
#: dashboard's ``vllm:gpu_cache_usage_perc`` is written with its vLLM 0.32 name
#: ``vllm:kv_cache_usage_perc`` (vLLM renamed it; 0.32 exports only the new name), and its prefix
#: hit rate (the router's ``vllm:gpu_prefix_cache_hit_rate``) as the ratio of vLLM's counters.
DASHBOARD = [
    ("TTFT p99", 'histogram_quantile(0.99, sum by(le) (rate(vllm:time_to_first_token_seconds_bucket'
                 '{model_name="tiny"}[1m])))'),
    ("TTFT average", 'rate(vllm:time_to_first_token_seconds_sum{model_name="tiny"}[1m]) / '
                     'rate(vllm:time_to_first_token_seconds_count{model_name="tiny"}[1m])'),
    ("E2E p50", 'histogram_quantile(0.5, sum by(le) (rate(vllm:e2e_request_latency_seconds_bucket'
                '{model_name="tiny"}[1m])))'),
    ("E2E average", 'rate(vllm:e2e_request_latency_seconds_sum{model_name="tiny"}[1m]) / '
                    'rate(vllm:e2e_request_latency_seconds_count{model_name="tiny"}[1m])'),
    ("E2E distribution", "sum by(le) (vllm:e2e_request_latency_seconds_bucket)"),
    ("running", 'vllm:num_requests_running{model_name="tiny"}'),
    ("waiting", 'vllm:num_requests_waiting{model_name="tiny"}'),
    ("KV-cache usage", 'vllm:kv_cache_usage_perc{model_name="tiny"}'),
    ("prefix hit rate", 'sum(rate(vllm:prefix_cache_hits_total{model_name="tiny"}[1m])) / '
                        'sum(rate(vllm:prefix_cache_queries_total{model_name="tiny"}[1m]))'),
    ("token throughput", 'rate(vllm:generation_tokens_total{model_name="tiny"}[1m])'),
    ("finish reason", 'sum by(finished_reason) (increase(vllm:request_success_total'
                      '{model_name="tiny"}[1m]))'),
    ("queue time", 'rate(vllm:request_queue_time_seconds_sum{model_name="tiny"}[1m])'),
]

#: The families of the issue, with their types.
FAMILIES = {
    "gauge": ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
              "vllm:cache_config_info", "vllm:engine_sleep_state", "greenfront:hub_lag_seconds",
              "process_resident_memory_bytes", "process_open_fds"],
    "counter": ["vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:num_preemptions",
                "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:prompt_tokens_cached",
                "vllm:request_success", "vllm:admission_rejections", "http_requests",
                "process_cpu_seconds"],
    "histogram": [
        "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
        "vllm:iteration_tokens_total", "vllm:request_max_num_generation_tokens",
        "vllm:request_params_n", "vllm:request_params_max_tokens",
        "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
        "vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds", "vllm:request_inference_time_seconds",
        "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
        "http_request_duration_seconds", "http_request_duration_highr_seconds"],
}


@pytest.fixture(scope="module")
def deployment(model_dir):
    srv = GreenfrontServer(model_dir, workers=2,
                           sim_args="--output-mode echo --itl-ms 2 --ttft-ms 5").start(timeout=180)
    try:
        yield srv
    finally:
        srv.stop_later()


def _scrape(srv, accept: str | None = None) -> requests.Response:
    headers = {"Accept": accept} if accept else {}
    r = requests.get(srv.url + "/metrics", headers=headers, timeout=30)  # a fresh connection
    assert r.status_code == 200
    return r


def _value(text: str, name: str, **labels: str) -> float:
    return sum(v for k, v in samples(text).get(name, {}).items()
               if all((a, b) in k for a, b in labels.items()))


def _send_batch(srv) -> dict:
    """12 completions, 8 streamed chats, 4 completions with n=2, one 400: 28 engine requests."""
    prompt_tokens = 0
    for i in range(12):
        r = requests.post(srv.url + "/v1/completions", timeout=60, json={
            "model": "tiny", "prompt": f"Hello world number {i}", "max_tokens": 5})
        assert r.status_code == 200, r.text
        prompt_tokens += r.json()["usage"]["prompt_tokens"]
    for i in range(8):
        r = requests.post(srv.url + "/v1/chat/completions", timeout=60, json={
            "model": "tiny", "messages": [{"role": "user", "content": f"Say hi {i}"}],
            "max_tokens": 4, "stream": True, "stream_options": {"include_usage": True}})
        assert r.status_code == 200
        events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        prompt_tokens += json.loads(events[-2])["usage"]["prompt_tokens"]
    for i in range(4):
        r = requests.post(srv.url + "/v1/completions", timeout=60, json={
            "model": "tiny", "prompt": f"Two samples {i}", "max_tokens": 3, "n": 2})
        assert r.status_code == 200, r.text
        prompt_tokens += 2 * r.json()["usage"]["prompt_tokens"]
    r = requests.post(srv.url + "/v1/completions", timeout=60,
                      json={"model": "tiny", "prompt": "x", "max_tokens": "many"})
    assert r.status_code == 400
    return {"success": 28, "generated": 12 * 5 + 8 * 4 + 8 * 3, "completions_2xx": 16,
            "chat_2xx": 8, "requests": 24, "prompt_tokens": prompt_tokens}


def _settled(srv, name: str, expected: float, **labels) -> str:
    """A scrape once ``name`` reached ``expected`` (each worker writes its counts every
    GREENFRONT_METRICS_FLUSH_INTERVAL)."""
    seen = []

    def reached() -> bool:
        seen.append(_value(_scrape(srv).text, name, **labels))
        return seen[-1] >= expected
    assert wait_for(reached, timeout=30), seen
    return _scrape(srv).text


def test_every_scrape_counts_the_whole_deployment(deployment):
    sent = _send_batch(deployment)
    _settled(deployment, "vllm:request_success_total", sent["success"])
    # The 400 came last, maybe from the other worker: its count may reach the shared files one
    # flush after the engine's (a fresh clone's run read 0 here once).
    _settled(deployment, "http_requests_total", 1, status="4xx")
    for _ in range(8):  # fresh connections: answered by either worker
        text = _scrape(deployment).text
        assert _value(text, "vllm:request_success_total") == sent["success"]
        assert _value(text, "vllm:request_success_total", finished_reason="length") == 28
        assert _value(text, "vllm:e2e_request_latency_seconds_count") == sent["success"]
        assert _value(text, "vllm:time_to_first_token_seconds_count") == sent["success"]
        assert _value(text, "vllm:request_queue_time_seconds_count") == sent["success"]
        assert _value(text, "vllm:generation_tokens_total") == sent["generated"]
        assert _value(text, "vllm:request_generation_tokens_sum") == sent["generated"]
        assert _value(text, "vllm:prompt_tokens_total") == sent["prompt_tokens"]
        # vLLM counts every token after a request's first as one inter-token gap.
        assert _value(text, "vllm:inter_token_latency_seconds_count") == (
            sent["generated"] - sent["success"])
        assert _value(text, "vllm:request_params_n_count") == sent["requests"]
        assert _value(text, "vllm:request_params_n_sum") == sent["success"]
        assert _value(text, "http_requests_total", handler="/v1/completions",
                      status="2xx", method="POST") == sent["completions_2xx"]
        assert _value(text, "http_requests_total", handler="/v1/chat/completions",
                      status="2xx", method="POST") == sent["chat_2xx"]
        assert _value(text, "http_requests_total", status="4xx") == 1
        assert _value(text, "http_request_duration_seconds_count",
                      handler="/v1/completions") == sent["completions_2xx"] + 1
        assert _value(text, "http_requests_total", handler="/metrics") == 0  # not counted
    # Both workers are alive and write into the shared files.
    assert len(samples(text)["greenfront:hub_lag_seconds"]) == 2


def test_families_types_and_openmetrics(deployment):
    from prometheus_client.parser import text_string_to_metric_families

    text = _scrape(deployment).text
    types = {f.name: f.type for f in text_string_to_metric_families(text)}
    for kind, names in FAMILIES.items():
        for name in names:
            assert types.get(name) == kind, (name, types.get(name))
    assert 'vllm:cache_config_info{block_size="16"' in text
    assert 'vllm:engine_sleep_state{engine="0",model_name="tiny",sleep_state="awake"} 1.0' in text
    r = _scrape(deployment, accept="application/openmetrics-text; version=1.0.0")
    assert r.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert r.text.endswith("# EOF\n")
    assert "# TYPE vllm:request_success counter" in r.text
    plain = _scrape(deployment)
    assert plain.headers["Content-Type"].startswith("text/plain; version=0.0.4")


def test_the_dashboard_queries_return_data(deployment):
    before_text = _scrape(deployment).text
    before = time.time()
    done = _value(before_text, "vllm:request_success_total")
    sent = _send_batch(deployment)
    after_text = _settled(deployment, "vllm:request_success_total", done + sent["success"])
    evaluator = Evaluator(before_text, after_text, time.time() - before)
    for panel, expr in DASHBOARD:
        result = evaluator.eval(expr)
        assert result, f"{panel}: no data for {expr}"
        assert all(not math.isnan(v) for v in result.values()), (panel, result)
    ttft = evaluator.eval(DASHBOARD[0][1])
    assert 0 < next(iter(ttft.values())) < 10
