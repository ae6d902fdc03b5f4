"""The benchmark's gRPC load generator (``python -m bench.grpc_load``) against a real
deployment with ``GREENFRONT_GRPC_PORT`` (2 workers, the simulator in echo mode): for about two
seconds, 32 ``GenerateStream`` streams on 4 HTTP/2 connections; tokens are counted, streams
finish, nothing fails. No timing assertions."""
from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.integration.harness import ROOT, GreenfrontServer
from tests.support.processes import free_port


def test_grpc_load_generator_counts_tokens_without_errors(tmp_path, model_dir):
    port = free_port()
    with GreenfrontServer(model_dir, workers=2, sim_args="--output-mode echo --ttft-ms 5 "
                          "--itl-ms 5", env={"GREENFRONT_GRPC_PORT": str(port)}):
        t = time.monotonic() + 1.5  # the load generator's import
        cfg = {"host": "127.0.0.1", "port": port, "model": "tiny", "seed": 0, "t_begin": t,
               "t0": t + 0.5, "t1": t + 2.0, "concurrency": 32, "ramp_s": 0.2,
               "min_tokens": 8, "max_tokens": 32, "connections": 4}
        (tmp_path / "cfg.json").write_text(json.dumps(cfg))
        run = subprocess.run([sys.executable, "-m", "bench.grpc_load", str(tmp_path / "cfg.json"),
                              str(tmp_path / "out.json")], cwd=ROOT, capture_output=True,
                             text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["mode"] == "grpc-stream" and out["connections"] == 4
    assert out["errors"] == 0 and out["error_kinds"] == {} and out["stalled"] == 0
    assert out["tokens_per_s"] > 0 and out["completed"] > 0
    assert out["tokens_counted_share"] == 1.0
    assert out["ttft_ms"]["count"] > 0 and out["itl_stream_mean_ms"]["count"] > 0
