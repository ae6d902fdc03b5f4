"""What ``vllm.Control``'s discovery RPCs answer, from the engines' registrations and the
configuration (``GetServerInfo``, ``GetModelInfo``, ``GetKvEventSources``).

Runs on: the HTTP hub (pure functions of read-only data).
"""
from __future__ import annotations

from typing import Any

from rpc.proto import control_pb2 as pb

#: What vLLM's Rust frontend reports as ``api_version``.
API_VERSION = "vllm"


def server_info(client: Any) -> pb.ServerInfo:
    """The deployment's facts: the first engine's registration, the blocks of them all."""
    regs = [client.registrations[rank] for rank in client.ranks]
    first = regs[0]
    backends = {reg.weight_transfer_backend for reg in regs}
    backend = next(iter(backends)) if len(backends) == 1 else None
    info = pb.ServerInfo(
        engine_version=first.vllm_version, api_version=API_VERSION,
        instance_id=first.instance_id,
        parallelism=pb.ParallelismInfo(
            tensor_parallel_size=first.tensor_parallel_size,
            pipeline_parallel_size=first.pipeline_parallel_size,
            data_parallel_size=first.data_parallel_size,
            data_parallel_rank=first.data_parallel_rank,
            decode_context_parallel_size=first.decode_context_parallel_size,
            world_size=first.world_size, data_parallel_size_local=len(regs)),
        max_model_len=client.max_model_len or first.max_model_len,
        kv_block_size=first.block_size,
        total_kv_blocks=sum(reg.num_gpu_blocks for reg in regs),
        max_running_requests=first.max_num_seqs,
        max_batched_tokens=first.max_num_batched_tokens, max_loras=first.max_loras,
        rl_capabilities=pb.RlCapabilities(
            weight_transfer_enabled=backend is not None,
            weight_transfer_backend=backend or "",
            sleep_mode_enabled=all(reg.enable_sleep_mode for reg in regs),
            draft_weight_updates_enabled=all(reg.supports_draft_weight_updates for reg in regs)))
    if first.effective_attention_block_size is not None:
        info.effective_attention_block_size = first.effective_attention_block_size
    return info


def model_info(config: Any, regs: list[Any]) -> pb.ModelInfo:
    names = config.model_names
    return pb.ModelInfo(
        model_id=config.model, served_model_name=names[0], served_model_aliases=names[1:],
        supports_text_input=True, supports_token_ids_input=True,
        supports_lora=all(reg.supports_lora for reg in regs), supports_multimodal=False,
        reasoning_parser=config.reasoning_parser or "",
        tool_call_parser=config.tool_call_parser or "")


def kv_event_sources(regs: list[Any]) -> list[pb.KvEventSource]:
    """The ZMQ KV-event publishers the engines announced (none without ``--kv-events-config``)."""
    out = []
    for reg in regs:
        cfg = reg.kv_events_config or {}
        if not cfg.get("enable_kv_cache_events") or cfg.get("publisher") != "zmq":
            continue
        out.append(pb.KvEventSource(
            transport="zmq", endpoint=cfg.get("endpoint") or "", topic=cfg.get("topic") or "",
            replay_endpoint=cfg.get("replay_endpoint") or "",
            data_parallel_rank=reg.data_parallel_rank, encoding="msgpack", schema_version=1,
            buffer_steps=cfg.get("buffer_steps") or 0, hwm=cfg.get("hwm") or 0,
            max_queue_size=cfg.get("max_queue_size") or 0))
    return out
