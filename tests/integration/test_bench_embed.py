"""The benchmark's embed scenario end to end (``python -m bench --smoke --scenarios embed``): a
real greenfront deployment on a pooling simulator, the embeddings load for a second and a half,
and the report. It stays out of the ``--smoke`` default (its own deployment, like
``stream-tools``), so this test is what runs it in the suite. No timing assertions."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.harness import ROOT


def test_bench_embed_counts_requests_with_no_errors(tmp_path, model_dir):
    out = tmp_path / "results"
    run = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--scenarios", "embed",
                          "--model-dir", model_dir, "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=180, check=False)
    assert run.returncode == 0, run.stderr[-5000:]
    (result_dir,) = list(out.iterdir())
    (phase,) = json.loads((result_dir / "results.json").read_text())["phases"]
    assert (phase["endpoint"], phase["scenario"]) == ("greenfront pooling", "embed")
    assert "--runner pooling" in phase["settings"]["sim_args"]
    load = phase["load"]
    assert load["completed"] > 0 and load["errors"] == 0, load["error_kinds"]
    assert phase["health"]["errors"] == 0
    assert load["inputs_per_request"] == 32 and load["dims"] == [128]
    assert 460 < load["tokens_per_input"] < 570  # ~512 tokens, as the model's tokenizer counts
    assert load["inputs_per_s"] == pytest.approx(load["req_per_s"] * 32)
    assert "### Embeddings: /v1/embeddings, 32 distinct inputs" in run.stdout
