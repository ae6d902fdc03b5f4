"""Command line of the engine-core simulator (options documented in ``engine.sim``).

Owns ``SimConfig`` and ``parse_args``. Called by ``engine.sim.__main__``.

Runs on: the simulator process.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["SimConfig", "parse_args"]


@dataclass(frozen=True)
class SimConfig:
    """Everything the simulator needs; defaults match the CLI defaults."""

    handshake: str | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    rank: int = 0
    max_model_len: int = 4096
    num_gpu_blocks: int = 16384
    block_size: int = 16
    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192
    data_parallel_size: int = 1
    vllm_version: str = "0.32.0"
    dtype: str = "bfloat16"
    enable_lora: bool = False
    max_loras: int = 4
    enable_sleep_mode: bool = False
    kv_events_endpoint: str | None = None
    ttft_ms: float = 20.0
    prefill_us_per_token: float = 0.0
    itl_ms: float = 10.0
    output_mode: str = "random"
    script_tokens: tuple[int, ...] = ()
    seed: int = 0
    vocab_size: int = 131072
    eos_after: int = 0
    disable_log_stats: bool = False
    strict_input_thread: bool = False
    die_after: int | None = None
    stall_after: int | None = None
    verbose: bool = False
    runner: str = "generate"
    convert: str = "embed"

    @property
    def supported_tasks(self) -> list[str]:
        """What ``get_supported_tasks`` answers: a real 0.32 engine's lists (docs/pooling.md §1)."""
        if self.runner != "pooling":
            return ["generate"]
        return ["token_embed", "embed"] if self.convert == "embed" else ["classify",
                                                                          "token_classify"]

    @property
    def emits_033_outputs(self) -> bool:
        """True when outputs carry 0.33's 19th element (``error``)."""
        parts = self.vllm_version.split(".")
        try:
            return (int(parts[0]), int(parts[1])) >= (0, 33)
        except (ValueError, IndexError):
            return True


def _script_tokens(parser: argparse.ArgumentParser, spec: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(part) for part in spec.split(",") if part.strip())
    except ValueError:
        parser.error("--script-tokens takes comma-separated token ids")
    if any(not 0 <= t < 2**31 for t in ids):
        parser.error("--script-tokens ids must be int32 token ids")
    return ids


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m engine.sim",
        description="vLLM v1 engine-core simulator (see the engine.sim module docstring).",
    )
    conn = p.add_argument_group("connection")
    conn.add_argument("--handshake", metavar="ADDR", help="frontend handshake ROUTER to connect to")
    conn.add_argument("--input", metavar="ADDR", action="append", default=[], help="input ROUTER (repeatable)")
    conn.add_argument("--output", metavar="ADDR", action="append", default=[], help="output PULL (repeatable)")
    conn.add_argument("--rank", type=int, default=0)
    reg = p.add_argument_group("registration")
    reg.add_argument("--max-model-len", type=int, default=4096)
    reg.add_argument("--num-gpu-blocks", type=int, default=16384)
    reg.add_argument("--block-size", type=int, default=16)
    reg.add_argument("--max-num-seqs", type=int, default=1024)
    reg.add_argument("--max-num-batched-tokens", type=int, default=8192)
    reg.add_argument("--data-parallel-size", type=int, default=1)
    reg.add_argument("--vllm-version", default="0.32.0")
    reg.add_argument("--dtype", default="bfloat16")
    reg.add_argument("--enable-lora", action="store_true")
    reg.add_argument("--max-loras", type=int, default=4)
    reg.add_argument("--enable-sleep-mode", action="store_true")
    reg.add_argument("--kv-events-endpoint", default=None,
                     help="report a KV-events ZMQ publisher at this endpoint in the registration")
    tim = p.add_argument_group("timing")
    tim.add_argument("--ttft-ms", type=float, default=20.0)
    tim.add_argument("--prefill-us-per-token", type=float, default=0.0)
    tim.add_argument("--itl-ms", type=float, default=10.0)
    out = p.add_argument_group("output")
    out.add_argument("--output-mode", choices=("echo", "random"), default="random")
    out.add_argument("--script-tokens", default="", metavar="IDS",
                     help="comma-separated token ids every request emits, as if its extra_args "
                          "had them in sim_tokens (the model's scripted answer)")
    out.add_argument("--seed", type=int, default=0)
    out.add_argument("--vocab-size", type=int, default=131072)
    out.add_argument("--eos-after", type=int, default=0)
    out.add_argument("--disable-log-stats", action="store_true")
    flt = p.add_argument_group("faults")
    flt.add_argument("--strict-input-thread", action="store_true")
    flt.add_argument("--die-after", type=int, default=None)
    flt.add_argument("--stall-after", type=int, default=None)
    pool = p.add_argument_group("pooling")
    pool.add_argument("--runner", choices=("generate", "pooling"), default="generate",
                      help="pooling: a pooling model's engine (vllm serve --runner pooling)")
    pool.add_argument("--convert", choices=("embed", "classify"), default="embed",
                      help="with --runner pooling: an embedding model or a 1-label classifier")
    p.add_argument("--verbose", action="store_true")
    return p


def parse_args(argv: Sequence[str] | None = None) -> SimConfig:
    """Parse the CLI; exits with usage (code 2) on bad combinations."""
    parser = _build_parser()
    ns = parser.parse_args(argv)
    if ns.handshake and (ns.input or ns.output):
        parser.error("use either --handshake or --input/--output, not both")
    if not ns.handshake and not (ns.input and ns.output):
        parser.error("need --handshake ADDR, or at least one --input and one --output")
    if ns.itl_ms <= 0:
        parser.error("--itl-ms must be positive")
    if ns.vocab_size < 2:
        parser.error("--vocab-size must be at least 2")
    if not 0 <= ns.rank < 65536:
        parser.error("--rank must fit in two bytes")
    return SimConfig(
        handshake=ns.handshake,
        inputs=list(ns.input),
        outputs=list(ns.output),
        rank=ns.rank,
        max_model_len=ns.max_model_len,
        num_gpu_blocks=ns.num_gpu_blocks,
        block_size=ns.block_size,
        max_num_seqs=ns.max_num_seqs,
        max_num_batched_tokens=ns.max_num_batched_tokens,
        data_parallel_size=ns.data_parallel_size,
        vllm_version=ns.vllm_version,
        dtype=ns.dtype,
        enable_lora=ns.enable_lora,
        max_loras=ns.max_loras,
        enable_sleep_mode=ns.enable_sleep_mode,
        kv_events_endpoint=ns.kv_events_endpoint,
        ttft_ms=ns.ttft_ms,
        prefill_us_per_token=ns.prefill_us_per_token,
        itl_ms=ns.itl_ms,
        output_mode=ns.output_mode,
        script_tokens=_script_tokens(parser, ns.script_tokens),
        seed=ns.seed,
        vocab_size=ns.vocab_size,
        eos_after=ns.eos_after,
        disable_log_stats=ns.disable_log_stats,
        strict_input_thread=ns.strict_input_thread,
        die_after=ns.die_after,
        stall_after=ns.stall_after,
        verbose=ns.verbose,
        runner=ns.runner,
        convert=ns.convert,
    )
