"""The metric families greenfront exports: vLLM 0.32's names, types, labels, help texts and
bucket boundaries (read from a scrape of vLLM's own frontend, ``make interop`` compares them), the
HTTP families of vLLM's server (prometheus-fastapi-instrumentator's defaults) and greenfront's own.

Pure data: ``runtime.metrics.registry`` makes prometheus-client objects from it.

Runs on: any thread (constants).
"""
from __future__ import annotations

from dataclasses import dataclass

ENGINE_LABELS = ("model_name", "engine")


@dataclass(frozen=True)
class Family:
    """One family. ``kind``: counter, gauge, histogram or summary; ``buckets``: a key of
    ``BUCKETS`` (``request_tokens`` is capped at max_model_len); ``mode``: the gauge's
    multiprocess mode (how the workers' values combine in a scrape)."""

    kind: str
    name: str
    help: str
    labels: tuple[str, ...] = ENGINE_LABELS
    buckets: str = ""
    mode: str = "mostrecent"


def one_two_five(limit: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, … up to ``limit`` (vLLM's token-count buckets)."""
    out, scale = [], 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > limit:
                return tuple(out)
            out.append(float(mantissa * scale))
        scale *= 10


_LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
            120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
         10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0)
BUCKETS: dict[str, tuple[float, ...]] = {
    "request_latency": _LATENCY,
    "time_to_first_token": _TTFT,
    "inter_token_latency": _ITL,
    "iteration_tokens": (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
    "request_params_n": (1, 2, 5, 10, 20),
    "request_num_preemptions": (1, 2, 3, 4, 5, 10, 20),
    "http_highr": (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5,
                   5, 7.5, 10, 30, 60),
    "http_lowr": (0.1, 0.5, 1),
    "hub_lag": (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0),
}

_WAITING_BY_REASON = (
    "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
    "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked "
    "status). Sum of all reasons equals vllm:num_requests_waiting.")
_SLEEP_STATE = (
    "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
    "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.")
_CACHED_BY_SOURCE = (
    "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host "
    "(offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
    "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
    "vllm:external_prefix_cache_hits.")
_SIZE = ("Content length of {} by handler. Only value of header is respected. Otherwise ignored. "
         "No percentile calculated. ")

#: Label values vLLM always exposes (each series exists from the start, at 0).
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHE_TIERS = ("device", "host", "p2p", "disk", "external_unspecified")
WAITING_REASONS = ("capacity", "deferred")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")
ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")

_E = ENGINE_LABELS
VLLM_FAMILIES: tuple[Family, ...] = (
    Family("gauge", "vllm:num_requests_running", "Number of requests in model execution batches."),
    Family("gauge", "vllm:num_requests_waiting", "Number of requests waiting to be processed."),
    Family("gauge", "vllm:num_requests_waiting_by_reason", _WAITING_BY_REASON, _E + ("reason",)),
    Family("gauge", "vllm:engine_sleep_state", _SLEEP_STATE, _E + ("sleep_state",)),
    Family("gauge", "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
    Family("counter", "vllm:prefix_cache_queries",
           "Prefix cache queries, in terms of number of queried tokens."),
    Family("counter", "vllm:prefix_cache_hits",
           "Prefix cache hits, in terms of number of cached tokens."),
    Family("counter", "vllm:external_prefix_cache_queries",
           "External prefix cache queries from KV connector cross-instance cache sharing, in "
           "terms of number of queried tokens."),
    Family("counter", "vllm:external_prefix_cache_hits",
           "External prefix cache hits from KV connector cross-instance cache sharing, in terms "
           "of number of cached tokens."),
    Family("counter", "vllm:mm_cache_queries",
           "Multi-modal cache queries, in terms of number of queried items."),
    Family("counter", "vllm:mm_cache_hits",
           "Multi-modal cache hits, in terms of number of cached items."),
    Family("counter", "vllm:num_preemptions", "Cumulative number of preemption from the engine."),
    Family("counter", "vllm:prompt_tokens", "Number of prefill tokens processed."),
    Family("counter", "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.",
           _E + ("source",)),
    Family("counter", "vllm:prompt_tokens_cached",
           "Number of cached prompt tokens (local + external)."),
    Family("counter", "vllm:prompt_tokens_cached_by_source", _CACHED_BY_SOURCE, _E + ("source",)),
    Family("counter", "vllm:generation_tokens", "Number of generation tokens processed."),
    Family("counter", "vllm:request_success", "Count of successfully processed requests.",
           _E + ("finished_reason",)),
    Family("counter", "vllm:admission_rejections",
           "Number of admission attempts rejected by a queue limit, by reason.",
           ("model_name", "reason")),
    Family("histogram", "vllm:request_prompt_tokens", "Number of prefill tokens processed.",
           buckets="request_tokens"),
    Family("histogram", "vllm:request_generation_tokens", "Number of generation tokens processed.",
           buckets="request_tokens"),
    Family("histogram", "vllm:iteration_tokens_total",
           "Histogram of number of tokens per engine_step.", buckets="iteration_tokens"),
    Family("histogram", "vllm:request_max_num_generation_tokens",
           "Histogram of maximum number of requested generation tokens.",
           buckets="request_tokens"),
    Family("histogram", "vllm:request_params_n", "Histogram of the n request parameter.",
           buckets="request_params_n"),
    Family("histogram", "vllm:request_params_max_tokens",
           "Histogram of the max_tokens request parameter.", buckets="request_tokens"),
    Family("histogram", "vllm:time_to_first_token_seconds",
           "Histogram of time to first token in seconds.", buckets="time_to_first_token"),
    Family("histogram", "vllm:inter_token_latency_seconds",
           "Histogram of inter-token latency in seconds.", buckets="inter_token_latency"),
    Family("histogram", "vllm:request_time_per_output_token_seconds",
           "Histogram of time_per_output_token_seconds per request.",
           buckets="inter_token_latency"),
    Family("histogram", "vllm:e2e_request_latency_seconds",
           "Histogram of e2e request latency in seconds.", buckets="request_latency"),
    Family("histogram", "vllm:request_queue_time_seconds",
           "Histogram of time spent in WAITING phase for request.", buckets="request_latency"),
    Family("histogram", "vllm:request_inference_time_seconds",
           "Histogram of time spent in RUNNING phase for request.", buckets="request_latency"),
    Family("histogram", "vllm:request_prefill_time_seconds",
           "Histogram of time spent in PREFILL phase for request.", buckets="request_latency"),
    Family("histogram", "vllm:request_decode_time_seconds",
           "Histogram of time spent in DECODE phase for request.", buckets="request_latency"),
    Family("histogram", "vllm:request_num_preemptions",
           "Histogram of the number of times a request was preempted.",
           buckets="request_num_preemptions"),
    Family("histogram", "vllm:request_prefill_kv_computed_tokens",
           "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
           buckets="request_tokens"),
)

#: vllm:cache_config_info's labels: the cache figures the engines' registration carries (vLLM
#: labels its whole CacheConfig; greenfront does not see the rest), and engine.
CACHE_INFO_FIELDS = ("block_size", "num_gpu_blocks", "kv_cache_size_tokens",
                     "kv_cache_max_concurrency", "mamba_block_size", "effective_attention_block_size")
CACHE_CONFIG_FAMILY = Family("gauge", "vllm:cache_config_info",
                             "Information of the LLMEngine CacheConfig",
                             CACHE_INFO_FIELDS + ("engine",))

#: Made only when an engine registered with LoRA support (vLLM: only with a lora_config). One
#: series per combination of adapters with requests in flight, set to the time of each scheduler
#: stats update; the latest-stamped series is the current one. vLLM's multiprocess mode is
#: ``sum``, which adds the workers' timestamps of the same series (vLLM warns that the metric is
#: wrong with several API servers); greenfront runs several workers by default, so the latest
#: of them is kept instead, and the value stays a time.
LORA_INFO_FAMILY = Family("gauge", "vllm:lora_requests_info", "Running stats on lora requests.",
                          ("max_lora", "waiting_lora_adapters", "running_lora_adapters"))

#: Handlers vLLM's instrumentator leaves out (probes and metadata), and greenfront's /ready.
HTTP_EXCLUDED = frozenset({"/metrics", "/health", "/load", "/ping", "/version", "/server_info",
                           "/ready"})
HTTP_FAMILIES: tuple[Family, ...] = (
    Family("counter", "http_requests_total",
           "Total number of requests by method, status and handler.",
           ("method", "status", "handler")),
    Family("summary", "http_request_size_bytes", _SIZE.format("incoming requests"), ("handler",)),
    Family("summary", "http_response_size_bytes", _SIZE.format("outgoing responses"),
           ("handler",)),
    Family("histogram", "http_request_duration_highr_seconds",
           "Latency with many buckets but no API specific labels. Made for more accurate "
           "percentile calculations. ", (), buckets="http_highr"),
    Family("histogram", "http_request_duration_seconds",
           "Latency with only few buckets by handler. Made to be only used if aggregation by "
           "handler is important. ", ("handler", "method"), buckets="http_lowr"),
)

GREENFRONT_FAMILIES: tuple[Family, ...] = (
    # One series per live worker (pid label): which worker lags matters to its readiness.
    Family("gauge", "greenfront:hub_lag_seconds",
           "How late the HTTP hub's lag timer fired: the largest lag of the last second.",
           (), mode="liveall"),
    Family("histogram", "greenfront:hub_lag_sample_seconds",
           "Every sample of the HTTP hub's lag timer (how late it fired).", (),
           buckets="hub_lag"),
)
