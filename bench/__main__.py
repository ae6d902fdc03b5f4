"""``python -m bench``: run the benchmark, print the Markdown report, save report/JSON/plots.

Owns the command line and the run: it asks `bench.plan` which deployments run which scenarios,
runs the phases in order and hands the results to `bench.report`.

* No ``--target``: greenfront's matrix. Long prompts for every configuration (HF ``tokenizers``
  and fastokens × offload on/off × 1 and 2 workers); ``/tokenize`` and streaming on the default
  configuration, streaming also with 2 workers and with offload off; the tokenizer limit.
* ``--target URL [--health-url URL] [--label NAME] [--target-pid PID]`` (repeatable) and/or
  ``--vllm-peers python,rust,greenfront`` (started here, each on a fresh simulator; ``greenfront``
  is greenfront launched by ``vllm serve``, one column per ``--serve-workers`` count): long prompts,
  ``/tokenize`` and streaming against each, with greenfront's default configuration as the
  reference column (``--no-greenfront`` drops it). A target must run on an engine with the
  simulator settings printed in the report (``python -m engine.sim --handshake ... <sim args>``)
  for the streaming "added latency" figures to mean anything.

* The embed scenarios (``bench.embed_load``): on their own deployment of greenfront's default
  configuration whose simulator is a pooling engine, and on each ``--vllm-peers`` that serves
  embeddings (``python``, ``greenfront``) restarted as an embedding model.
The agent APIs' streaming (``stream-chat``, ``stream-responses``, ``stream-messages``) runs in
``--agent-rounds`` rounds on a default deployment of its own (``bench.plan.agent_step``).

``--quick`` (~1-2 min) and ``--smoke`` (~30-60 s, for the test suite) shorten every phase.
``--soak [--duration S]``: instead, ``bench.soak``'s mixed load against one default deployment
(10 minutes by default), reporting RSS, errors, requests left in the engine and ``/health``.
Progress goes to stderr, one line per phase; the report to stdout and
``bench/results/<timestamp>/``.

Runs on: the orchestrator process (everything else is a subprocess it starts and always stops).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import sys
import time
from typing import Any

from bench import report, run_meta, soak
from bench.agent_streams import AGENT_SCENARIOS
from bench.deploy import DEFAULT_MODEL_DIR, ROOT, PEER_KINDS, GreenfrontDeployment, parse_cpus
from bench.plan import plan, schedule
from bench.embed_load import EMBED_SCENARIOS
from bench.scenarios import (
    FULL,
    GRPC_SCENARIO,
    QUICK,
    SMOKE,
    TOOLS_SCENARIO,
    SimProfile,
    run_limit,
    run_phase,
)

SCENARIOS = ("long", "tokenize", "stream", TOOLS_SCENARIO, GRPC_SCENARIO, *AGENT_SCENARIOS,
             *EMBED_SCENARIOS, "limit")
#: What --smoke leaves out unless --scenarios names it: each needs its own deployment (the agent
#: APIs' streams run once each on the default deployment instead of in rounds).
NOT_IN_SMOKE = (TOOLS_SCENARIO, GRPC_SCENARIO, *EMBED_SCENARIOS)


def _headline(phase: dict[str, Any]) -> str:
    load, health = phase["load"], phase["health"]["latency_ms"]
    errors = load["errors"] + phase["health"]["errors"]
    if phase["scenario"] in ("stream", TOOLS_SCENARIO, GRPC_SCENARIO, *AGENT_SCENARIOS):
        main = f"{load['tokens_per_s']:,.0f} tokens/s, TTFT p50 {load['ttft_ms']['p50']:.0f} ms"
    elif phase["scenario"] in EMBED_SCENARIOS:
        main = f"{load['req_per_s']:.1f} req/s ({load['inputs_per_s']:,.0f} inputs/s)"
    else:
        main = f"{load['req_per_s']:.1f} req/s"
    return f"{main}, /health p99.9 {health['p99.9']:.1f} ms, errors {errors}"


def _parser() -> argparse.ArgumentParser:
    """The command line's options."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    speed = p.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true",
                       help="short phases, 1 worker only (~1-2 minutes)")
    speed.add_argument("--smoke", action="store_true", help="tiny phases (test suite smoke run)")
    speed.add_argument("--soak", action="store_true",
                       help="mixed load against one deployment for --duration (bench.soak)")
    p.add_argument("--duration", type=float, default=600.0, metavar="S",
                   help="--soak: seconds of load (default 600; the warm-up is a tenth of it)")
    p.add_argument("--soak-clients", type=int, default=32, metavar="N",
                   help="--soak: closed-loop clients (default 32)")
    p.add_argument("--scenarios", default=None,
                   help=f"comma-separated subset of {','.join(SCENARIOS)} (default: all; "
                        f"--smoke: all but {', '.join(NOT_IN_SMOKE)}, which need their own "
                        f"deployments; the agent APIs' once each on the default deployment)")
    p.add_argument("--backends", default="hf,fastokens", help="tokenizer backends of the matrix")
    p.add_argument("--workers", default=None,
                   help="gunicorn worker counts of the matrix (default 1,2; --quick: 1)")
    p.add_argument("--offload", default="on,off", help="offload settings of the matrix")
    p.add_argument("--long-concurrency", type=int, default=None, metavar="N",
                   help="clients of the long-prompt phases (default 32; --quick: 16)")
    p.add_argument("--target", action="append", default=[], metavar="URL",
                   help="an already running OpenAI-compatible server (repeatable)")
    p.add_argument("--health-url", action="append", default=[], metavar="URL",
                   help="its health URL (default URL/health), in --target order")
    p.add_argument("--label", action="append", default=[], help="its column name, in --target order")
    p.add_argument("--target-pid", action="append", type=int, default=[], metavar="PID",
                   help="its main process (CPU accounting of the tree), in --target order")
    p.add_argument("--vllm-peers", default="",
                   help="start vLLM's frontends (python,rust) and/or greenfront launched by "
                        "vllm serve (greenfront)")
    p.add_argument("--serve-workers", default="",
                   help="with --vllm-peers greenfront: GREENFRONT_WORKERS of each such column, "
                        "e.g. 1,2 (default: one column with greenfront's default)")
    p.add_argument("--peers", default=os.environ.get("PEERS", "/tmp/peers"),
                   help="where interop/setup.sh installed vLLM (make interop-setup)")
    p.add_argument("--no-greenfront", action="store_true",
                   help="with targets: do not add greenfront's default configuration")
    p.add_argument("--server-cpus", default=f"0-{(os.cpu_count() or 1) - 1}",
                   help="CPUs of the server under test (taskset syntax; default: all)")
    p.add_argument("--client-cpus", default=str((os.cpu_count() or 1) - 1),
                   help="CPUs of the simulator, load generator and prober (default: the last)")
    p.add_argument("--tools-rounds", type=int, default=None, metavar="N",
                   help="rounds of plain and tool-calling streams, alternated, then one more "
                        "plain phase (default: 7; --quick 2, --smoke 1)")
    p.add_argument("--grpc-rounds", type=int, default=None, metavar="N",
                   help="rounds of plain HTTP and gRPC streams on one deployment, alternated, "
                        "then one more HTTP phase (default: as --tools-rounds)")
    p.add_argument("--agent-rounds", type=int, default=None, metavar="N",
                   help="rounds of chat, Responses and Messages streams on one deployment, then "
                        "one more chat phase (default: 7; --quick 2, --smoke 1)")
    p.add_argument("--model-dir", default=DEFAULT_MODEL_DIR,
                   help="model directory greenfront serves (and the tokenizer limit loads)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"),
                   help="results directory (a timestamped subdirectory is made)")
    return p


def _parse(argv: list[str]) -> argparse.Namespace:
    """The options, their comma-separated lists split and the mode's defaults filled in."""
    p = _parser()
    args = p.parse_args(argv)
    args.mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.tools_rounds is None:
        # Seven: one round's ratio moves by ~8% with this machine's drift, and the target is
        # judged 10% from parity; three rounds put a 93% true ratio under 90% one run in three.
        args.tools_rounds = {"full": 7, "quick": 2, "smoke": 1}[args.mode]
    if args.grpc_rounds is None:
        args.grpc_rounds = args.tools_rounds  # the same drift to average out
    if args.agent_rounds is None:
        args.agent_rounds = {"full": 7, "quick": 2, "smoke": 1}[args.mode]
    if min(args.tools_rounds, args.grpc_rounds, args.agent_rounds) < 1:
        p.error("--tools-rounds, --grpc-rounds and --agent-rounds must be at least 1")
    if args.scenarios is None:
        args.scenarios = ",".join(s for s in SCENARIOS
                                  if not (args.smoke and s in NOT_IN_SMOKE))
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    if unknown := set(args.scenarios) - set(SCENARIOS):
        p.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    args.backends = [b for b in args.backends.split(",") if b]
    if args.workers is None:
        args.workers = "1" if args.quick else "1,2"
    args.workers = [int(w) for w in args.workers.split(",") if w]
    args.offload = [o in ("on", "1", "true") for o in args.offload.split(",") if o]
    args.vllm_peers = [k for k in args.vllm_peers.split(",") if k]
    if unknown := set(args.vllm_peers) - set(PEER_KINDS):
        p.error(f"unknown --vllm-peers: {', '.join(sorted(unknown))}")
    args.serve_workers = [int(w) for w in args.serve_workers.split(",") if w] or [None]
    if args.smoke:
        # Two deployments only: the default configuration and its inline baseline.
        args.backends, args.workers = ["fastokens"], [1]
    return args


def _limits(args: argparse.Namespace) -> list[tuple[str, int]]:
    if "limit" not in args.scenarios:
        return []
    if args.smoke:
        return [("fastokens", 2)]
    backends = args.backends if not (args.target or args.vllm_peers) else ["hf", "fastokens"]
    threads = [2] if args.quick else [1, 2, 4]
    return [(b, t) for b in backends for t in threads]


def _soak(args: argparse.Namespace, argv: list[str]) -> int:
    """One default deployment (1 worker, fastokens, offload) under ``bench.soak``'s load."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = os.path.join(args.out, f"{stamp}-soak")
    os.makedirs(out_dir, exist_ok=True)
    meta = {"command": "python -m bench " + " ".join(argv), "commit": run_meta.commit(),
            "machine": run_meta.machine(), "busy": run_meta.busy_processes()}
    sim = SimProfile(ttft_ms=5.0, itl_ms=5.0)
    deployment = GreenfrontDeployment(
        "soak", workers=args.workers[0], sim_args=sim.args, server_cpus=parse_cpus(
            args.server_cpus), client_cpus=parse_cpus(args.client_cpus), log_dir=out_dir,
        model_dir=args.model_dir)
    with deployment as endpoint:
        result = soak.run_soak(endpoint, args.duration, args.duration / 10, args.soak_clients,
                               progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    result["meta"] = meta
    with open(os.path.join(out_dir, "soak.json"), "w") as f:
        json.dump(result, f, indent=1)
    markdown = soak.report(result, meta)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(markdown)
    print(markdown)
    print(f"report and JSON: {out_dir}", file=sys.stderr)
    return 1 if result["errors"] or result["left_in_engine"] else 0


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.soak:
        return _soak(args, argv)
    timing = {"full": FULL, "quick": QUICK, "smoke": SMOKE}[args.mode]
    if args.long_concurrency:
        timing = dataclasses.replace(timing, long_concurrency=args.long_concurrency)
    server_cpus, client_cpus = parse_cpus(args.server_cpus), parse_cpus(args.client_cpus)
    sim = SimProfile()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = os.path.join(args.out, stamp)
    work = os.path.join(out_dir, "work")
    os.makedirs(work, exist_ok=True)
    steps = plan(args, server_cpus, client_cpus, sim, work)
    limits = _limits(args)
    total = sum(s.phases for s in steps) + len(limits)
    results: dict[str, Any] = {"meta": run_meta.meta(args, argv, stamp, sim), "phases": [],
                               "limits": []}
    started = time.monotonic()
    n = 0

    def progress(msg: str) -> None:
        print(f"[{n}/{total} {time.monotonic() - started:5.0f}s] {msg}", file=sys.stderr,
              flush=True)

    for step in steps:
        try:
            with contextlib.ExitStack() as stack:
                endpoint = stack.enter_context(step.open())
                partner = None if step.partner is None else stack.enter_context(step.partner())
                for round_, ep, scenario in schedule(step, endpoint, partner):
                    n += 1
                    phase = run_phase(ep, scenario, timing, sim, client_cpus, work)
                    if round_ is not None:
                        phase["round"] = round_
                        phase["endpoint"] = f"{ep.label} #{round_}"
                        phase["settings"] = dict(phase["settings"], paired=ep is partner)
                    results["phases"].append(phase)
                    progress(f"{phase['endpoint']} / {scenario}: {_headline(phase)}")
        except RuntimeError as exc:
            # One failing deployment (e.g. a peer that will not start) must not lose the rest.
            n += step.phases
            progress(f"{step.label}: FAILED: {str(exc)[:500]}")
            results.setdefault("failures", []).append({"step": step.label, "error": str(exc)})
    for backend, threads in limits:
        n += 1
        lim = run_limit(backend, threads, timing, server_cpus, work, args.model_dir)
        results["limits"].append(lim)
        progress(f"tokenizer limit {backend} x{threads}: {lim['prompts_per_s']:.1f} prompts/s")
    results["meta"]["loadavg_end"] = run_meta.loadavg()
    commit_end = run_meta.commit()
    if commit_end != results["meta"]["commit"]:
        results["meta"]["code_changed_during_run"] = commit_end
        print(f"warning: the code changed during the run (now {commit_end})", file=sys.stderr)
    markdown = report.write(results, out_dir)
    print(markdown)
    print(f"report, JSON and plots: {out_dir}", file=sys.stderr)
    return 1 if results.get("failures") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
