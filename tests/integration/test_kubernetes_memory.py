"""The memory deploy/kubernetes.yaml requests covers what a deployment measurably uses."""
from __future__ import annotations

import requests

from tests.integration.test_shutdown import _descendants
from tests.unit.deploy.test_kubernetes_manifest import _documents, memory_bytes


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def test_memory_request_covers_the_measured_resident_memory(server):
    # Warm the worker up the way traffic does (tokenizer, template, engine client in use).
    for _ in range(3):
        assert requests.post(server.url + "/v1/chat/completions", timeout=30, json={
            "model": "tiny", "max_tokens": 8,
            "messages": [{"role": "user", "content": "hello " * 200}]}).status_code == 200
    pids = [server.proc.pid] + _descendants(server.proc.pid)
    total = sum(_rss(pid) for pid in pids)
    (container,) = _documents()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert total < memory_bytes(container["resources"]["requests"]["memory"]), total
