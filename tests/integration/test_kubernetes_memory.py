"""The memory deploy/kubernetes.yaml requests covers what a deployment measurably uses."""
from __future__ import annotations

import requests

from tests.integration.test_shutdown import _descendants
from tests.unit.deploy.test_kubernetes_manifest import _documents, memory_bytes


def _pss(pid: int) -> int:
    """Proportional set size: each page counted once across the processes that share it, as the
    container's memory cgroup charges it. The workers share the tokenizer pages the master loaded
    before it forked, so a sum of VmRSS would count those pages once per process."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def test_memory_request_covers_the_measured_resident_memory(server):
    # Warm the worker up the way traffic does (tokenizer, template, engine client in use).
    for _ in range(3):
        assert requests.post(server.url + "/v1/chat/completions", timeout=30, json={
            "model": "tiny", "max_tokens": 8,
            "messages": [{"role": "user", "content": "hello " * 200}]}).status_code == 200
    pids = [server.proc.pid] + _descendants(server.proc.pid)
    per_process = {pid: _pss(pid) for pid in pids}
    (container,) = _documents()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert len(per_process) >= 4, per_process    # master, worker, handshake server, simulator
    assert sum(per_process.values()) < memory_bytes(
        container["resources"]["requests"]["memory"]), per_process
