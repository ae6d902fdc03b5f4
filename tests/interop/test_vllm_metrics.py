"""/metrics beside vLLM 0.32's own Python frontend, both on greenfront's simulator.

The same requests go to both; then every metric family either exports must have the same type,
help text, label names and histogram buckets in the other, except the differences listed (and
explained) in ``KNOWN_DIFFERENCES``.
"""
from __future__ import annotations

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.harness import GreenfrontServer, wait_for
from tests.interop.peers import requires_peers, vllm_frontend_on_simulator

pytestmark = requires_peers

#: family -> why it differs. Anything else that differs fails the test.
KNOWN_DIFFERENCES = {
    # vLLM labels its whole CacheConfig; greenfront knows the figures the engines register.
    "vllm:cache_config_info": "labels: the registration's cache figures only",
    # MFU estimates come from the engine's perf stats; greenfront does not export them.
    "vllm:estimated_flops_per_gpu": "not built",
    "vllm:estimated_read_bytes_per_gpu": "not built",
    "vllm:estimated_write_bytes_per_gpu": "not built",
    # Per-process garbage-collector counts mean nothing for a deployment of several workers.
    "python_gc_collections": "per process",
    "python_gc_objects_collected": "per process",
    "python_gc_objects_uncollectable": "per process",
    # greenfront's own.
    "greenfront:hub_lag_seconds": "greenfront's",
    "greenfront:hub_lag_sample_seconds": "greenfront's",
}


def _families(text: str) -> dict[str, tuple]:
    """family -> (type, help, label names, buckets). ``_created`` series are left out: vLLM
    writes them with one API server, not in multiprocess mode (greenfront's, and vLLM's own with
    --api-server-count > 1)."""
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name.endswith("_created"):
            continue
        labels = sorted({k for s in family.samples for k in s.labels if k not in ("le",)})
        buckets = sorted({float(s.labels["le"]) for s in family.samples if "le" in s.labels})
        out[family.name] = (family.type, family.documentation, tuple(labels), tuple(buckets))
    return out


def _traffic(url: str) -> None:
    r = requests.post(url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "The capital of France is", "max_tokens": 5})
    assert r.status_code == 200, r.text
    r = requests.post(url + "/v1/chat/completions", timeout=60, json={
        "model": "tiny", "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4,
        "stream": True})
    assert r.status_code == 200
    assert requests.post(url + "/v1/completions", timeout=60, json={
        "model": "tiny", "prompt": "x", "max_tokens": "many"}).status_code == 400


@pytest.fixture(scope="module")
def vllm_metrics(tmp_path_factory):
    logs = str(tmp_path_factory.mktemp("vllm-metrics"))
    # Engine stats on (no --disable-log-stats): vLLM then exports every vllm:* family. A loaded
    # 2-core machine starts it slowly.
    with vllm_frontend_on_simulator(logs, timeout=900) as frontend:
        _traffic(frontend.url)
        assert wait_for(lambda: "vllm:request_success_total{" in requests.get(
            frontend.url + "/metrics", timeout=10).text, timeout=30)
        yield requests.get(frontend.url + "/metrics", timeout=10).text


def test_greenfront_exports_vllms_families(vllm_metrics, model_dir):
    srv = GreenfrontServer(model_dir, workers=2, sim_args="--output-mode echo",
                           env={"GREENFRONT_MAX_MODEL_LEN": "2048"}).start(timeout=180)
    try:
        _traffic(srv.url)
        assert wait_for(lambda: 'finished_reason="length",model_name="tiny"} 2.0' in
                        requests.get(srv.url + "/metrics", timeout=10).text, timeout=30)
        ours = _families(requests.get(srv.url + "/metrics", timeout=10).text)
    finally:
        srv.stop()
    theirs = _families(vllm_metrics)
    differences = {name: (theirs.get(name), ours.get(name))
                   for name in set(theirs) | set(ours)
                   if theirs.get(name) != ours.get(name) and name not in KNOWN_DIFFERENCES}
    assert not differences, differences
    # The known differences are real ones (so the list stays short and true).
    for name in KNOWN_DIFFERENCES:
        assert theirs.get(name) != ours.get(name), name
    assert "vllm:time_to_first_token_seconds" in ours and "http_requests" in ours
