"""What a simulated engine tells the frontend it is: the registration it sends on each input
socket once connected, made from its configuration (as a real engine reports its own).

Runs on: the simulator process, one thread.
"""
from __future__ import annotations

import random

from engine.protocol import EngineCoreReadyResponse, encode_registration
from engine.sim.config import SimConfig


def _kv_events_config(cfg: SimConfig) -> dict | None:
    """vLLM's ``KVEventsConfig`` as a map (every field, as an engine encodes the dataclass)
    when --kv-events-endpoint is given: a ZMQ publisher there, this rank's own port."""
    if cfg.kv_events_endpoint is None:
        return None
    return {"enable_kv_cache_events": True, "publisher": "zmq",
            "endpoint": cfg.kv_events_endpoint, "replay_endpoint": None,
            "buffer_steps": 10000, "hwm": 100000, "max_queue_size": 100000,
            "topic": ""}


def registration(cfg: SimConfig, dp_stats_address: str | None) -> bytes:
    """The registration message (vLLM's ``EngineCoreReadyResponse``) of an engine set up as
    ``cfg``; ``dp_stats_address`` is the frontend's stats address from INIT, if any."""
    kv_tokens = cfg.num_gpu_blocks * cfg.block_size
    return encode_registration(
        EngineCoreReadyResponse(
            max_model_len=cfg.max_model_len,
            num_gpu_blocks=cfg.num_gpu_blocks,
            block_size=cfg.block_size,
            dp_stats_address=dp_stats_address,
            dtype=cfg.dtype,
            vllm_version=cfg.vllm_version,
            world_size=1,
            data_parallel_size=cfg.data_parallel_size,
            tensor_parallel_size=1,
            pipeline_parallel_size=1,
            decode_context_parallel_size=1,
            data_parallel_rank=cfg.rank,
            max_num_seqs=cfg.max_num_seqs,
            max_num_batched_tokens=cfg.max_num_batched_tokens,
            instance_id=str(random.getrandbits(63)),
            supports_lora=cfg.enable_lora,
            max_loras=cfg.max_loras if cfg.enable_lora else 0,
            mamba_block_size=None,
            kv_cache_size_tokens=kv_tokens,
            kv_cache_max_concurrency=kv_tokens / max(1, cfg.max_model_len),
            kv_events_config=_kv_events_config(cfg),
            weight_transfer_backend=None,
            enable_sleep_mode=cfg.enable_sleep_mode,
            supports_draft_weight_updates=False,
            effective_attention_block_size=cfg.block_size,
        )
    )
