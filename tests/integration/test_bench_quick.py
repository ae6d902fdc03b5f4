"""Smoke test of the benchmark (``python -m bench --smoke``): it runs and writes its outputs.

A very short run (~30-60 s: two deployments, tiny phases) that checks only that the report, the
JSON and the plots exist and carry the expected keys. No timing assertions: figures from a
shared CI machine mean nothing; ``make bench`` is where numbers come from.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.integration.harness import ROOT


def test_bench_smoke_writes_report_json_and_plots(tmp_path, model_dir):
    out = tmp_path / "results"
    # One deployment (offload on): the inline baseline's deployment only repeats the same code
    # paths and took a quarter of this test's time; make bench-quick runs the whole matrix.
    run = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--offload", "on",
                          "--model-dir", model_dir, "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True,
                         timeout=240, check=False)
    assert run.returncode == 0, run.stderr[-5000:]
    (result_dir,) = list(out.iterdir())
    assert "| configuration |" in run.stdout  # the Markdown table on stdout
    assert "/health" in (result_dir / "report.md").read_text()

    results = json.loads((result_dir / "results.json").read_text())
    assert {"meta", "phases", "limits", "targets"} <= set(results)
    assert {"command", "machine", "pinning", "sim_args"} <= set(results["meta"])
    scenarios = {(p["endpoint"], p["scenario"]) for p in results["phases"]}
    assert {s for _, s in scenarios} == {"long", "tokenize", "stream", "stream-chat",
                                         "stream-responses", "stream-messages"}
    for phase in results["phases"]:
        assert {"load", "health", "cpu_s", "settings"} <= set(phase)
        assert {"server", "engine", "loadgen", "prober"} <= set(phase["cpu_s"])
        assert {"p50", "p99", "p99.9", "max"} <= set(phase["health"]["latency_ms"])
        streamed = phase["scenario"].startswith("stream")
        assert ("tokens_per_s" if streamed else "req_per_s") in phase["load"]
        if phase["scenario"] in ("stream-responses", "stream-messages"):
            # every stream ran to its limit, and its tokens were counted
            assert phase["load"]["errors"] == 0
            assert phase["load"]["ended_before_limit"] == 0
            assert phase["load"]["tokens_per_s"] > 0
        raw = result_dir / "raw" / f"health-{phase['endpoint']}.{phase['scenario']}.json"
        assert json.loads(raw.read_text())["samples"]
    assert {"prompts_per_s", "backend", "threads"} <= set(results["limits"][0])
    judged = {t["target"].split(" ")[0] for t in results["targets"]}
    assert {"Responses", "Messages"} <= judged  # issue 22's targets, against the chat phase

    pngs = {p.name for p in result_dir.glob("*.png")}
    assert {"throughput.png", "health_long.png", "health_stream.png"} <= pngs
    for name in pngs:
        assert os.path.getsize(result_dir / name) > 1000
