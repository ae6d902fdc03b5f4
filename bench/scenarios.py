"""The scenarios and the phase runner: one phase = one scenario against one endpoint.

Owns ``Timing`` (how long each phase warms up and measures: full, ``--quick``, ``--smoke``),
``SimProfile`` (the simulator settings every engine of a run uses, so the streaming figures can
subtract its configured latencies), and ``run_phase`` / ``run_limit``: spawn the load generator
and the prober (pinned to the client cores), read every process's CPU at the window's edges,
collect their JSON.

Scenarios:
  ``long``      ~300k-character distinct prompts to /v1/completions, 4 output tokens, closed loop
  ``tokenize``  the same prompts to /tokenize (vLLM's Rust frontend's published figure is for it)
  ``stream``    1,024 streams of short prompts, 64-256 tokens each, simulator at 50 ms TTFT and
                20 ms inter-token latency (a realistic decode speed)
  ``stream-tools`` the same streams as chats with tools, the simulator scripted (its
                ``--script-tokens``) to answer with hermes tool calls (``TOOL_CALL_TEXT``
                repeated), the server with
                ``--enable-auto-tool-choice --tool-call-parser hermes``: every token goes through
                the tool parser
  ``embed``     batches of 32 distinct ~512-token texts to /v1/embeddings (float), closed loop,
                on a pooling simulator (``bench.embed_load``); ``embed-base64`` the same in base64
  ``grpc-stream`` the ``stream`` load as vLLM's gRPC ``GenerateStream`` calls
                (``bench.grpc_load``, on the endpoint's gRPC port)
  ``stream-chat``, ``stream-responses``, ``stream-messages`` the same streams to
                /v1/chat/completions, /v1/responses and /v1/messages (``bench.agent_streams``),
                in rounds on one deployment, chat the reference
  ``limit``     the tokenizer alone (``bench.tokenizer_limit``)
All with ``/health`` probed at 200/s by a separate process.

Runs on: the benchmark orchestrator process (subprocesses do the work).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.agent_streams import API_OF
from bench.deploy import (
    DEFAULT_MODEL_DIR,
    MARKER_MODEL_DIR,
    ROOT,
    Endpoint,
    cpu_delta,
    cpu_seconds,
    machine_busy_seconds,
    pinned,
    socket_counts,
)
from bench.embed_load import EMBED_SCENARIOS
from bench.embed_load import config as embed_config
from tests.support.processes import cmdline

#: Seconds given to a fresh load-generator/prober process to import and build its prompts.
SPAWN_S = 1.5

TOOLS_SCENARIO = "stream-tools"
GRPC_SCENARIO = "grpc-stream"
#: The tool-calling deployment: the marker-token model and vLLM's hermes parser flags.
TOOLS_ENV = {"GREENFRONT_ENABLE_AUTO_TOOL_CHOICE": "1", "GREENFRONT_TOOL_CALL_PARSER": "hermes"}
TOOLS = [{"type": "function", "function": {
    "name": "search_flights", "description": "Find flights",
    "parameters": {"type": "object", "properties": {
        "origin": {"type": "string"}, "destination": {"type": "string"},
        "date": {"type": "string"}, "passengers": {"type": "integer"}}}}}]
TOOL_CALL_TEXT = ('<tool_call>\n{"name": "search_flights", "arguments": {"origin": "Paris", '
                  '"destination": "New York", "date": "2026-12-24", "passengers": 2}}\n'
                  "</tool_call>\n")


def tool_call_ids(model_dir: str = MARKER_MODEL_DIR) -> list[int]:
    """The scripted answer of the tool-calling streams, as the model's token ids."""
    from engine.sim.script import script_ids
    from text.tokenizer import Tokenizer
    return script_ids(Tokenizer.load(model_dir, backend="hf"), TOOL_CALL_TEXT)


def tools_sim_args(sim: "SimProfile") -> str:
    """The tool-calling deployment's simulator: every request is answered with the scripted
    tool calls (``--script-tokens``), so the requests carry nothing a real agent's would not.
    PERF: as ``vllm_xargs.sim_tokens`` the 53 ids were parsed, validated and encoded again in
    every request, work that a plain stream never did (part of the gap judged here)."""
    return f"{sim.args} --script-tokens {','.join(map(str, tool_call_ids()))}"


@dataclass(frozen=True)
class Timing:
    long_warmup_s: float
    long_s: float
    stream_warmup_s: float
    stream_s: float
    limit_s: float
    long_concurrency: int = 32
    stream_concurrency: int = 1024
    stream_ramp_s: float = 2.0
    chars: int = 300_000
    probe_rate: float = 200.0
    #: given to a phase's fresh processes before its load begins (``SPAWN_S``)
    spawn_s: float = SPAWN_S


FULL = Timing(long_warmup_s=4, long_s=25, stream_warmup_s=4, stream_s=20, limit_s=8,
              stream_ramp_s=4.0)
# Quick: 16 clients, so that an inline HF server (~0.26 s per prompt, all clients served in
# turn) finishes a round inside the short window.
QUICK = Timing(long_warmup_s=2, long_s=5, stream_warmup_s=2, stream_s=5, limit_s=2.5,
               long_concurrency=16, stream_ramp_s=1.0)
SMOKE = Timing(long_warmup_s=0.5, long_s=1.0, stream_warmup_s=0.5, stream_s=1.0, limit_s=1.0,
               long_concurrency=4, stream_concurrency=32, stream_ramp_s=0.3, chars=30_000,
               probe_rate=100.0, spawn_s=0.5)


@dataclass(frozen=True)
class SimProfile:
    """Engine simulator settings of a run (the streaming scenario's baseline latencies)."""

    ttft_ms: float = 50.0
    itl_ms: float = 20.0
    max_model_len: int = 131072

    @property
    def args(self) -> str:
        return (f"--max-model-len {self.max_model_len} --ttft-ms {self.ttft_ms:g} "
                f"--itl-ms {self.itl_ms:g} --output-mode echo --max-num-seqs 4096 "
                f"--num-gpu-blocks 1048576")

    @property
    def expected_ttft_ms(self) -> float:
        # The simulator emits the first token at the first step after arrival + ttft, and steps
        # every itl: on average half a step later than ttft.
        return self.ttft_ms + self.itl_ms / 2


def _spawn(module: str, cfg: dict[str, Any], workdir: str, name: str,
           cpus: set[int]) -> tuple[subprocess.Popen, str]:
    cfg_path = os.path.join(workdir, f"{name}.cfg.json")
    out_path = os.path.join(workdir, f"{name}.out.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(workdir, f"{name}.stderr"), "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", module, cfg_path, out_path], cwd=ROOT,
                                stderr=err, start_new_session=True,
                                preexec_fn=pinned(cpus))  # noqa: PLW1509 (no threads here)
    return proc, out_path


def _collect(proc: subprocess.Popen, out_path: str, timeout: float) -> dict[str, Any]:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{out_path}: process did not finish in time") from None
    if proc.returncode != 0:
        with open(out_path.replace(".out.json", ".stderr"), errors="replace") as f:
            raise RuntimeError(f"{out_path}: exit {proc.returncode}: {f.read()[-3000:]}")
    with open(out_path) as f:
        return json.load(f)


def _sleep_until(t: float) -> None:
    delay = t - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _load_config(endpoint: Endpoint, scenario: str, timing: Timing, base: dict[str, Any],
                 stream: bool) -> tuple[str, dict[str, Any]]:
    """The load generator's module and configuration for ``scenario``."""
    if stream:
        load_cfg = dict(base, mode="stream", concurrency=timing.stream_concurrency,
                        ramp_s=timing.stream_ramp_s, min_tokens=64, max_tokens=256)
        if scenario == TOOLS_SCENARIO:
            load_cfg.update(tools=TOOLS)
        elif scenario in API_OF:
            load_cfg.update(api=API_OF[scenario].name)
        if scenario == GRPC_SCENARIO:
            return "bench.grpc_load", dict(load_cfg, port=endpoint.grpc_port)
        return "bench.loadgen", load_cfg
    if scenario in EMBED_SCENARIOS:  # the long phases' timing and clients
        return "bench.embed_load", embed_config(base, scenario, timing.long_concurrency)
    return "bench.loadgen", dict(base, mode="long", concurrency=timing.long_concurrency,
                                 chars=timing.chars, max_tokens=4,
                                 endpoint="tokenize" if scenario == "tokenize" else "completions")


def run_phase(endpoint: Endpoint, scenario: str, timing: Timing, sim: SimProfile,
              client_cpus: set[int], workdir: str, seed: int = 0) -> dict[str, Any]:
    """Load + /health probe against ``endpoint``; returns load, health and CPU figures."""
    host, port = endpoint.host_port
    stream = scenario in ("stream", TOOLS_SCENARIO, GRPC_SCENARIO, *API_OF)
    warmup = timing.stream_warmup_s + timing.stream_ramp_s if stream else timing.long_warmup_s
    duration = timing.stream_s if stream else timing.long_s
    t_begin = time.monotonic() + timing.spawn_s
    t0 = t_begin + warmup
    t1 = t0 + duration
    base = {"host": host, "port": port, "model": endpoint.model, "seed": seed,
            "t_begin": t_begin, "t0": t0, "t1": t1}
    module, load_cfg = _load_config(endpoint, scenario, timing, base, stream)
    probe_cfg = {"health_url": endpoint.health_url, "rate": timing.probe_rate,
                 "t_begin": t_begin, "t0": t0, "t1": t1}
    name = f"{endpoint.label}.{scenario}"
    load, load_out = _spawn(module, load_cfg, workdir, name + ".load", client_cpus)
    probe, probe_out = _spawn("bench.prober", probe_cfg, workdir, name + ".probe", client_cpus)
    try:
        groups = {"server": endpoint.server_pids, "engine": endpoint.engine_pids,
                  "loadgen": lambda: [load.pid], "prober": lambda: [probe.pid]}
        _sleep_until(t0)
        busy_before = machine_busy_seconds()
        before = {k: cpu_seconds(f()) for k, f in groups.items()}
        sockets = socket_counts(endpoint.server_pids())
        _sleep_until(t1)
        after = {k: cpu_seconds(f()) for k, f in groups.items()}
        busy_after = machine_busy_seconds()
        load_result = _collect(load, load_out, 30.0)
        probe_result = _collect(probe, probe_out, 30.0)
    finally:
        for proc in (load, probe):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    cpu = {k: cpu_delta(before[k], after[k]) for k in groups}
    cpu["window_s"] = duration
    # Everything else the machine ran meanwhile (the orchestrator, the kernel, other users); a
    # bare --target without --target-pid lands here too.
    cpu["other"] = max(0.0, busy_after - busy_before - sum(cpu[k] for k in groups))
    # Per server process: shows whether the workers shared the load.
    cpu["server_by_pid"] = {f"{pid} {cmdline(pid)[:60]}": round(v - before["server"].get(pid, 0), 3)
                            for pid, v in after["server"].items()}
    cpu["server_sockets_by_pid"] = {str(pid): n for pid, n in sockets.items()}
    return {"endpoint": endpoint.label, "scenario": scenario, "settings": endpoint.settings,
            "load": load_result, "health": probe_result, "cpu_s": cpu,
            "timing": asdict(timing), "sim": asdict(sim) | {"args": sim.args}}


def run_limit(backend: str, threads: int, timing: Timing, server_cpus: set[int],
              workdir: str, model_dir: str = DEFAULT_MODEL_DIR, seed: int = 0) -> dict[str, Any]:
    """The tokenizer's throughput alone, pinned to the server's cores."""
    cfg = {"model_dir": model_dir, "backend": backend, "threads": threads,
           "duration": timing.limit_s, "chars": timing.chars, "seed": seed,
           "prompts": 40 if timing is SMOKE else 300}
    proc, out = _spawn("bench.tokenizer_limit", cfg, workdir, f"limit.{backend}.{threads}",
                       server_cpus)
    try:
        result = _collect(proc, out, timing.limit_s + 120.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    result["cpus"] = sorted(server_cpus)
    return result
