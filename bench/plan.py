"""The benchmark's plan: which deployments run which scenarios, and in what order.

Owns ``Step`` (one deployment or target and its scenarios), ``plan`` (greenfront's matrix without
``--target``; otherwise greenfront's default configuration beside each peer and target; the
embed scenarios on their own pooling deployments, ``embed_steps``) and ``schedule`` (the order
of a step's phases, paired rounds included).

Runs on: the benchmark orchestrator process.
"""
from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from base.host import default_worker_count
from bench.deploy import (
    MARKER_MODEL_DIR,
    POOLING_ARGS,
    Endpoint,
    GreenfrontDeployment,
    VllmPeer,
    external_endpoint,
)
from bench.agent_streams import AGENT_SCENARIOS, CHAT_SCENARIO
from bench.embed_load import EMBED_SCENARIOS
from bench.scenarios import GRPC_SCENARIO, TOOLS_ENV, TOOLS_SCENARIO, SimProfile, tools_sim_args

#: The peers the embed scenarios run against: vLLM's Python frontend, and greenfront under
#: ``vllm serve``. Not vLLM's Rust frontend: vllm-rs 0.32 serves no pooling routes.
EMBED_PEERS = ("python", "greenfront")


@dataclass
class Step:
    """One deployment (or target) and the scenarios it runs."""

    label: str
    scenarios: list[str]
    open: Any  # () -> context manager yielding an Endpoint
    settings: dict = field(default_factory=dict)
    #: the tool-calling step: a plain deployment of the same configuration, open beside it, and
    #: how many rounds of (plain ``stream``, then the step's own scenario) alternate; one more
    #: plain phase closes the run
    partner: Any = None
    rounds: int = 1
    #: the gRPC step: the scenario (plain ``stream``) that alternates with the step's own on the
    #: same deployment, in rounds as with a partner
    alternate: str | None = None
    #: the agent APIs' step: the scenario (chat streaming) that opens every round on the same
    #: deployment and closes the run, as the partner's plain phases do
    closing: str | None = None

    @property
    def phases(self) -> int:
        if self.closing is not None:
            return len(self.scenarios) * self.rounds + 1
        if self.partner is None and self.alternate is None:
            return len(self.scenarios) * self.rounds
        return (len(self.scenarios) + 1) * self.rounds + 1


def gf_label(backend: str, offload: bool, workers: int) -> str:
    return f"gf {backend} {'offload' if offload else 'inline'} {workers}w"


def matrix(args: argparse.Namespace, mk, default_workers: int) -> list[Step]:
    wanted = set(args.scenarios)
    steps = []
    for backend in args.backends:
        for workers in args.workers:
            for offload in args.offload:
                default = backend == "fastokens" and offload
                scen = ["long"]
                if default and workers == 1:
                    scen += ["tokenize", "stream"]
                elif args.mode == "full" and backend == "fastokens" and (offload or workers == 1):
                    scen += ["stream"]  # 2 workers, and the inline baseline, full runs only
                scen = [s for s in scen if s in wanted]
                agents = [s for s in AGENT_SCENARIOS if s in wanted]
                if default and workers == 1 and agents and args.mode == "smoke":
                    # Once each, on the default deployment: the test suite's run stays short.
                    scen += agent_order(agents)
                    agents = []
                if scen:
                    steps.append(mk(backend, offload, workers, scen))
                if default and workers == 1 and TOOLS_SCENARIO in wanted:
                    step = mk(backend, offload, workers, [TOOLS_SCENARIO], tools=True)
                    step.partner = mk(backend, offload, workers, ["stream"], paired=True).open
                    step.rounds = args.tools_rounds
                    steps.append(step)
                if default and workers == 1 and agents:
                    steps.append(agent_step(mk(backend, offload, workers, [], agents=True), agents,
                                            args.agent_rounds))
    if GRPC_SCENARIO in wanted:
        steps.append(grpc_rounds(args, mk, default_workers))
    return steps + embed_steps(args, mk, min(default_workers, max(args.workers)))


def agent_order(wanted: list[str]) -> list[str]:
    """The agent scenarios a round runs: chat streaming, the reference, always, then the wanted
    Responses / Messages scenarios."""
    return [CHAT_SCENARIO, *(s for s in wanted if s != CHAT_SCENARIO)]


def agent_step(step: Step, wanted: list[str], rounds: int) -> Step:
    """The agent APIs' step on a deployment of its own: ``agent_order`` in ``rounds`` rounds and
    a closing chat phase (just one chat phase when only chat is wanted)."""
    step.scenarios = agent_order(wanted)
    if len(step.scenarios) > 1:
        step.rounds, step.closing = rounds, CHAT_SCENARIO
    return step


def embed_steps(args: argparse.Namespace, mk, workers: int, peer=None) -> list[Step]:
    """The embed scenarios' deployments, on a pooling simulator: greenfront's default
    configuration with ``workers`` workers, and (``peer(kind)``) each of ``EMBED_PEERS`` asked
    for with ``--vllm-peers``."""
    scen = [s for s in EMBED_SCENARIOS if s in args.scenarios]
    if not scen:
        return []
    steps = [] if args.no_greenfront else [mk("fastokens", True, workers, scen, pooling=True)]
    if peer is not None:
        steps += [peer(kind, scen) for kind in args.vllm_peers if kind in EMBED_PEERS]
    return steps


def grpc_rounds(args: argparse.Namespace, mk, workers: int) -> Step:
    """gRPC streaming against plain HTTP streaming on one deployment of greenfront's default
    configuration (fastokens, offload, its default worker count), in ``--grpc-rounds`` rounds
    (``schedule``; judged by ``bench.report_grpc``)."""
    step = mk("fastokens", True, workers, [GRPC_SCENARIO], grpc=True, rounds_of="grpc")
    step.alternate, step.rounds = "stream", args.grpc_rounds
    return step


def target_steps(args: argparse.Namespace, scen: list[str]) -> list[Step]:
    """One step per ``--target``: a server someone else started."""
    steps = []
    for i, url in enumerate(args.target):
        label = args.label[i] if i < len(args.label) else f"target{i + 1}"
        health = args.health_url[i] if i < len(args.health_url) else None
        pid = args.target_pid[i] if i < len(args.target_pid) else None

        @contextlib.contextmanager
        def open_(url=url, label=label, health=health, pid=pid) -> Iterator[Endpoint]:
            yield external_endpoint(label, url, health, pid)
        steps.append(Step(label, scen, open_))
    return steps


def plan(args: argparse.Namespace, server_cpus: set[int], client_cpus: set[int],
          sim: SimProfile, log_dir: str) -> list[Step]:
    def mk(backend: str, offload: bool, workers: int, scen: list[str], reference: bool = False,
           tools: bool = False, paired: bool = False, pooling: bool = False,
           grpc: bool = False, rounds_of: str = "", agents: bool = False):
        label = "greenfront" if reference else gf_label(backend, offload, workers)
        sim_args = tools_sim_args(sim) if tools else sim.args
        if pooling:  # an embedding model's engine (the embed scenarios)
            label, sim_args = "greenfront pooling", f"{sim.args} {' '.join(POOLING_ARGS)}"
        if rounds_of:  # its own deployment, in the matrix and beside the peers alike
            label = ("greenfront" if args.target or args.vllm_peers else label) + f" {rounds_of}"
        if tools:  # its own deployment: the marker-token model and the hermes parser
            label += " hermes tools"
        if paired:  # the plain deployment the tool-calling phases alternate with
            label += " paired"
        if agents:  # chat, Responses and Messages streams in rounds (bench.agent_streams)
            label += " agent APIs"

        def open_() -> GreenfrontDeployment:
            return GreenfrontDeployment(label, workers=workers, offload=offload, backend=backend,
                                        sim_args=sim_args,
                                        server_cpus=server_cpus,
                                        client_cpus=client_cpus, log_dir=log_dir,
                                        model_dir=MARKER_MODEL_DIR if tools else args.model_dir,
                                        reference=reference, grpc=grpc,
                                        extra_env=TOOLS_ENV if tools else None)
        return Step(label, scen, open_)

    # greenfront's default configuration: its default worker count on the server's CPUs.
    default_workers = min(default_worker_count(), len(server_cpus))
    if not (args.target or args.vllm_peers):
        return matrix(args, mk, default_workers)
    scen = [s for s in ("long", "tokenize", "stream", GRPC_SCENARIO) if s in args.scenarios]
    grpc = GRPC_SCENARIO in scen
    steps = [] if args.no_greenfront else [
        mk("fastokens", True, default_workers, scen, reference=True, grpc=grpc)]
    if grpc and not args.no_greenfront:
        steps.append(grpc_rounds(args, mk, default_workers))
    for kind in args.vllm_peers:
        for workers in (args.serve_workers if kind == "greenfront" else [None]):
            label = f"vllm-{kind}" if kind != "greenfront" else "greenfront-vllm-serve" + (
                f"-{workers}w" if workers else "")
            # Only vLLM's Rust frontend serves gRPC beside HTTP.
            peer_scen = [s for s in scen if s != GRPC_SCENARIO or kind == "rust"]
            steps.append(Step(label, peer_scen, lambda kind=kind, workers=workers: VllmPeer(
                kind, sim_args=sim.args, server_cpus=server_cpus, client_cpus=client_cpus,
                log_dir=log_dir, peers=args.peers, workers=workers, grpc=grpc)))
    steps += target_steps(args, [s for s in scen if s != GRPC_SCENARIO])

    def peer(kind: str, scen: list[str]) -> Step:
        label = f"vllm-{kind}" if kind != "greenfront" else "greenfront-vllm-serve"
        return Step(f"{label} pooling", scen, lambda: VllmPeer(
            kind, sim_args=sim.args, server_cpus=server_cpus, client_cpus=client_cpus,
            log_dir=log_dir, peers=args.peers, pooling=True))
    # (--scenarios may name only the embed scenarios: no generation deployment then.)
    return [s for s in steps if s.scenarios] + embed_steps(args, mk, default_workers, peer)


def schedule(step: Step, endpoint: Any, partner: Any) -> Iterator[tuple[int | None, Any, str]]:
    """(round or None, endpoint, scenario) in the order a step runs them. With a partner, each
    round runs the partner's plain ``stream`` and then the step's scenario, back to back, and a
    last plain phase (round ``rounds + 1``) closes the run: every tool-calling phase has a plain
    phase on each side, and is judged against their mean.

    PERF (measurement): this machine's speed drifts by up to 2x within a minute (the same
    pure-Python loop took 0.36-0.72 s in twelve runs 4 s apart), so one plain phase and one
    tool-calling phase minutes apart gave 79-113% for the same code; alternating them and
    judging the median round keeps the drift out of the ratio. The closing plain phase: the
    speed also moves within a run (six plain phases in a row: 24.0, 24.6, 21.6, 21.3, 21.2,
    21.0k tokens/s; in one 7-round run the plain phases went from 14.9k to 23.3k), and with
    the plain phase always first, a drift through a round counted against its tool-calling
    phase alone; against the plain phases on both sides, a drift one way through a round
    cancels out."""
    if step.closing is not None:
        # Round k runs the reference, then the others, in reverse order every other round: a
        # drift through a round then favours neither.
        first, *others = step.scenarios
        for round_ in range(1, step.rounds + 1):
            for scenario in [first, *(others if round_ % 2 else others[::-1])]:
                yield round_, endpoint, scenario
        yield step.rounds + 1, endpoint, step.closing
        return
    if partner is None and step.alternate is None:
        for scenario in step.scenarios:
            yield None, endpoint, scenario
        return
    # The gRPC step alternates with plain streaming on its own deployment (no partner).
    plain, other = (endpoint, step.alternate) if partner is None else (partner, "stream")
    for round_ in range(1, step.rounds + 1):
        yield round_, plain, other
        for scenario in step.scenarios:
            yield round_, endpoint, scenario
    yield step.rounds + 1, plain, other
