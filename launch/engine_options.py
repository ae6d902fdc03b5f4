"""The ``vllm serve`` options whose whole effect is in the engines (vLLM 0.32's list).

Under ``vllm serve`` the engines read them from their own configuration, so ``--args-json``
passes them by without a setting; ``greenfront serve`` has no engines of vLLM's and refuses them
as unknown (they belong on the engines' command line). Engine options that vLLM's frontend also
reads (the tokenizer, metrics, media limits, ...) are not here: ``launch.args_json`` honours or
refuses each of them. ``tests/unit/test_no_silent_ignore.py`` checks that every option of vLLM
0.32 is in exactly one of these tables.

Runs on: the launcher process (data only).
"""
from __future__ import annotations

ENGINE_ONLY = frozenset({
    "additional_config", "all2all_backend", "allow_deprecated_quantization", "async_scheduling",
    "attention_backend", "attention_config", "aux_output_config", "block_size",
    "compilation_config", "config_format", "cp_kv_cache_interleave_size",
    "cpu_distributed_timeout_seconds", "cpu_offload_gb", "cpu_offload_params",
    "cudagraph_capture_sizes", "cudagraph_metrics", "data_parallel_address",
    "data_parallel_backend", "data_parallel_external_lb", "data_parallel_hybrid_lb",
    "data_parallel_multi_port_external_lb", "data_parallel_rank", "data_parallel_rpc_port",
    "data_parallel_size_local", "data_parallel_start_rank",
    "dbo_decode_token_threshold", "dbo_prefill_token_threshold", "dcp_comm_backend",
    "dcp_kv_cache_interleave_size", "dcp_q_replicate", "decode_context_parallel_size",
    "default_mm_loras", "device_ids", "diffusion_config", "disable_cascade_attn",
    "disable_chunked_mm_input", "disable_custom_all_reduce", "disable_hybrid_kv_cache_manager",
    "disable_nccl_for_dp_synchronization", "disable_sliding_window",
    "distributed_executor_backend", "distributed_timeout_seconds", "download_dir",
    "dp_sync_interval", "dtype", "ec_manager_config", "ec_transfer_config",
    "elastic_ep_max_dp_size", "enable_batch_sharded_sampling", "enable_chunked_prefill",
    "enable_cumem_allocator", "enable_dbo", "enable_elastic_ep", "enable_ep_weight_filter",
    "enable_eplb", "enable_expert_parallel", "enable_fault_tolerance",
    "enable_flashinfer_autotune", "enable_hc_sp", "enable_layerwise_nvtx_tracing",
    "enable_logging_iteration_details", "enable_lora", "enable_mamba_cache_stochastic_rounding",
    "enable_mamba_shared_prefix_checkpoint", "enable_mixed_moe_lora_format", "enable_mm_embeds",
    "enable_moe_shared_loras", "enable_nccl_comm_suspend", "enable_prefix_caching",
    "enable_shm_tensor_arena", "enable_sleep_mode", "enable_tower_connector_lora",
    "enable_trace_replay", "enforce_eager", "engram_config", "eplb_config",
    "expert_placement_strategy", "fail_on_environ_validation", "fault_tolerance_config",
    "fully_sharded_loras", "gdn_prefill_backend", "gpu_memory_utilization", "ignore_patterns",
    "interleave_mm_strings", "ir_op_priority", "jit_monitor_mode", "jit_monitor_verbose",
    "kda_decode_backend", "kda_prefill_backend", "kernel_config", "kv_cache_dtype",
    "kv_cache_dtype_skip_layers", "kv_cache_memory_bytes", "kv_cache_metrics_sample",
    "kv_events_config", "kv_offloading_backend", "kv_offloading_size", "kv_sharing_fast_prefill",
    "kv_transfer_config", "linear_backend", "load_format", "log_config_file", "log_level",
    "logging_config", "logits_processors", "logprobs_mode", "long_prefill_token_threshold",
    "long_prefill_token_threshold_adaptive", "lora_dtype", "lora_target_modules", "mamba_backend",
    "mamba_block_size", "mamba_cache_dtype", "mamba_cache_mode", "mamba_cache_philox_rounds",
    "mamba_ssm_cache_dtype", "mamba_ssu_algorithm", "master_addr", "master_port", "max_cpu_loras",
    "max_cudagraph_capture_size", "max_lora_cls_labels", "max_lora_rank", "max_loras",
    "max_num_active_seqs", "max_num_batched_tokens", "max_num_scheduled_tokens", "max_num_seqs",
    "max_parallel_loading_workers", "mm_device_do_normalize", "mm_encoder_attn_backend",
    "mm_encoder_attn_dtype", "mm_encoder_fp8_scale_path", "mm_encoder_fp8_scale_save_margin",
    "mm_encoder_fp8_scale_save_path", "mm_encoder_only", "mm_encoder_tp_mode",
    "mm_hasher_algorithm", "mm_ipc_gpu_memory_gb", "mm_processor_cache_gb",
    "mm_processor_cache_type", "mm_processor_device", "mm_shm_cache_max_object_size_mb",
    "mm_tensor_ipc", "model_class_overrides", "model_impl", "model_loader_extra_config",
    "moe_backend", "nnodes", "node_rank", "num_gpu_blocks_override", "numa_bind", "numa_bind_cpus",
    "numa_bind_nodes", "offload_backend", "offload_group_size", "offload_num_in_group",
    "offload_params", "offload_prefetch_step", "optimization_level", "performance_mode",
    "pipeline_parallel_size", "prefill_context_parallel_size", "prefill_schedule_interval",
    "prefix_cache_retention_interval", "prefix_caching_hash_algo", "prefix_match_unit",
    "profiler_config", "pt_load_map_location", "quantization", "quantization_config",
    "ray_workers_use_nsight", "reasoning_config", "replayssm_buffer_len",
    "safetensors_load_strategy", "safetensors_prefetch_block_size",
    "safetensors_prefetch_num_threads", "scheduler_cls", "scheduler_reserve_full_isl",
    "scheduling_policy", "seed", "skip_mm_profiling", "sleep_mode_offload_cudagraph",
    "sleep_preserve_parameter_names", "sparse_indexer_topk_backend", "spec_method", "spec_model",
    "spec_tokens", "specialize_active_lora", "speculative_config", "swa_bounded_replay",
    "tensor_parallel_size", "ubatch_size", "use_fp64_gumbel", "use_replayssm", "use_tqdm_on_load",
    "video_pruning_method", "video_pruning_rate", "watermark", "watermark_config",
    "weight_transfer_config", "worker_cls", "worker_extension_cls",
})
