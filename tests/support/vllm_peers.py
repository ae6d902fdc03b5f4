"""Real vLLM 0.32 (CPU) as the interop tests and the benchmark start it: where
``interop/setup.sh`` installed it, its environment, and the command lines of its frontends.

One home for both users: ``tests/interop/peers.py`` (``vllm serve`` in its various shapes) and
``bench.deploy.VllmPeer`` (vLLM's frontends against a fresh simulator, side by side with
greenfront).

Runs on: the test process or the benchmark orchestrator.
"""
from __future__ import annotations

import os

#: Where ``interop/setup.sh`` installs vLLM (``PEERS=DIR make interop-setup`` chooses another).
PEERS = os.environ.get("PEERS", "/tmp/peers")


def vllm_bin(peers: str = PEERS) -> str:
    """The ``vllm`` command of the peers' virtual environment."""
    return os.path.join(peers, "vllm-venv", "bin", "vllm")


def tiny_model(peers: str = PEERS) -> str:
    """The tiny random-weight model with the Tekken tokenizer (``interop/make_tiny_model.py``)."""
    return os.path.join(peers, "tiny-model")


def rust_frontend_bin(peers: str = PEERS) -> str:
    """vLLM's Rust frontend binary (``vllm-rs``) of the same release as the engine."""
    return os.path.join(peers, "rs032", "vllm-rs")


#: CPU-only vLLM settings for a 2-core machine.
VLLM_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache
    "VLLM_CPU_OMP_THREADS_BIND": "auto",  # the engine's worker on core 0, core 1 left free
    "VLLM_HOST_IP": "127.0.0.1",  # engine sockets on loopback
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


def serve_args(served_name: str = "tiny", max_model_len: int = 2048,
               max_num_seqs: int = 64) -> list[str]:
    """``vllm serve`` options every peer shares (after the model)."""
    return ["--host", "127.0.0.1", "--served-model-name", served_name, "--max-model-len",
            str(max_model_len), "--max-num-seqs", str(max_num_seqs), "--enforce-eager",
            "--dtype", "bfloat16", "--disable-uvicorn-access-log"]


SERVE_ARGS = serve_args()


def external_engine_args(rpc_port: int) -> list[str]:
    """``vllm serve`` options for a frontend that starts no engine and waits for one remote
    engine (DP rank 0) on the handshake socket ``tcp://127.0.0.1:rpc_port``."""
    return ["--data-parallel-size", "1", "--data-parallel-size-local", "0",
            "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", str(rpc_port)]


def external_frontend(kind: str, port: int, rpc_port: int, *, model: str,
                      max_model_len: int = 2048, frontend_bin: str = "",
                      peers: str = PEERS) -> tuple[list[str], dict[str, str]]:
    """(argv, environment additions) of a frontend serving HTTP on ``port`` for one remote
    engine that joins its handshake on ``rpc_port``.

    Kinds: ``python`` (vLLM's own Python frontend), ``rust`` (``vllm-rs serve`` alone, no Python
    in the frontend), ``supervised`` (``vllm serve`` launching ``frontend_bin`` as its Rust
    frontend, ``VLLM_USE_RUST_FRONTEND=1``: vLLM's supervisor, sockets and handshake in front).
    """
    env = {**VLLM_ENV, "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    if kind == "rust":
        argv = [frontend_bin or rust_frontend_bin(peers), "serve", model, "--host", "127.0.0.1",
                "--port", str(port), "--served-model-name", "tiny", "--max-model-len",
                str(max_model_len), "--disable-log-stats", *external_engine_args(rpc_port)]
        return argv, env
    if kind not in ("python", "supervised"):
        raise ValueError(f"unknown frontend kind {kind!r}")
    argv = [vllm_bin(peers), "serve", model, "--port", str(port),
            *serve_args(max_model_len=max_model_len), "--disable-log-stats",
            *external_engine_args(rpc_port)]
    if kind == "supervised":
        env.update(VLLM_USE_RUST_FRONTEND="1",
                   VLLM_RUST_FRONTEND_PATH=frontend_bin or rust_frontend_bin(peers))
    return argv, env
