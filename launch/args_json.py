"""``--args-json``: the non-default ``vllm serve`` options, sorted into honoured, ignored, refused.

``vllm serve`` passes every option whose value differs from its parser default (engine options
too) plus ``model_tag``, ``engine_ready_timeout_secs`` and ``http_timeout_keep_alive``
(docs/engine-protocol.md §6.3). Frontend options greenfront implements become ``GREENFRONT_*``
settings (read by config.py like any other); engine-only options are ignored; frontend options
greenfront does not implement are refused together, in one message, as vllm-rs does.

Runs on: the launcher process, before gunicorn starts.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from base.frontend_options import histogram_buckets
from base.settings import lora_module_list

#: vLLM frontend options whose behaviour greenfront does not have. Setting any of them to a
#: non-default value is refused rather than silently ignored.
UNSUPPORTED = frozenset({
    "trust_request_mm_kwargs", "tool_strict_level", "tool_server",
    "enable_log_outputs", "enable_log_deltas",
    "cohere_is_reasoning_model", "cohere_format",
    "enable_ssl_refresh", "ssl_ciphers", "middleware",
    "disable_access_log_for_endpoints", "skip_tokenizer_init",
    "enable_prompt_embeds", "override_generation_config", "tokenizer_revision",
    "hf_config_path", "enable_flash_late_interaction",
    # Engine options vLLM's frontend reads too (metrics, tracing, model files, plugins, outputs
    # greenfront does not return): refused, not passed by (docs/options.md).
    "hf_overrides", "revision", "code_revision",
    "otlp_traces_endpoint", "collect_detailed_traces", "reasoning_parser_plugin",
    "io_processor_plugin", "enable_mfu_metrics", "kv_cache_metrics",
    "show_hidden_metrics_for_version", "per_request_spec_decode_metrics", "hf_token",
    "aggregate_engine_logging", "enable_return_routed_experts", "return_sampling_mask",
    "pooler_config", "h11_max_header_count", "h11_max_incomplete_event_size",
    # vllm serve --grpc: vLLM's Python gRPC-only server in place of HTTP (greenfront serves
    # gRPC beside HTTP on --grpc-port instead, docs/grpc.md).
    "grpc",
})


def _names(value: Any) -> str:
    names = [value] if isinstance(value, str) else list(value or [])
    return ",".join(str(n) for n in names)


def _flag(value: Any) -> str:
    return "1" if value else "0"


def _not_flag(value: Any) -> str:
    return _flag(not value)


def _chat_template_format(value: Any) -> str | None:
    # Only the "string" content format is built; "auto" picks it for the templates we render.
    if value in ("auto", "string"):
        return None
    raise _Refused()


def _tokenizer_mode(value: Any) -> str | None:
    if value in ("auto", "hf"):
        return None
    raise _Refused()


def _generation_config(value: Any) -> str:
    if value in ("auto", "vllm"):
        return value
    raise _Refused()


def _generate_runner(value: Any) -> str | None:
    # ``--runner pooling``/``--convert embed|classify`` make the engines pooling models: the
    # engine decides, greenfront learns it from get_supported_tasks (docs/pooling.md §1).
    if value in ("auto", "generate", "none", "pooling", "embed", "classify"):
        return None
    raise _Refused()


def _one_api_server(value: Any) -> str | None:
    # greenfront's workers are GREENFRONT_WORKERS; one API server is what it is.
    if value in (None, 1):
        return None
    raise _Refused()


def _keep_alive_interval(value: Any) -> str:
    # vLLM: whole seconds, 0 turns it off, a negative value is an error at start.
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _Refused()
    try:
        seconds = int(value)
    except ValueError:
        raise _Refused() from None
    if seconds < 0:
        raise _Refused()
    return str(seconds)


def _histogram_buckets(value: Any) -> str:
    # Checked at start with vLLM's messages (a ValueError ends the launch, exit 2).
    return json.dumps({k: list(v) for k, v in histogram_buckets(value).items()})


def _fingerprint_mode(value: Any) -> str | None:
    if value in ("full", "hash", "custom", "none"):
        return None  # applied by _fingerprint, with fingerprint_value
    raise _Refused()


def _fingerprint(args: dict) -> str | None:
    mode = args.get("fingerprint_mode", "full")
    if mode == "none":
        return ""
    if mode == "custom":
        return str(args.get("fingerprint_value") or "")
    return None  # full/hash hash vLLM's own config: keep greenfront's fingerprint


class _Refused(Exception):
    pass


def _structured_outputs_backend(value: Any) -> str | None:
    # The other keys (whitespace, additional properties, enable_in_reasoning) are the
    # engine's: it reads them from its own config.
    if not isinstance(value, dict):
        raise _Refused()
    backend = value.get("backend", "auto")
    return None if backend == "auto" else str(backend)


def _lora_modules(value: Any) -> str:
    """vLLM's ``--lora-modules``: from ``--args-json`` a list of LoRAModulePath objects; on
    ``greenfront serve``'s command line ``name=path`` items or JSON objects, as vLLM parses them."""
    modules = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str) and "=" in item and "," not in item:
            name, path = item.split("=", 1)
            item = {"name": name, "path": path}
        elif isinstance(item, str):
            try:
                item = json.loads(item)
            except json.JSONDecodeError:
                raise _Refused() from None
        modules.append(item)
    text = json.dumps(modules)
    try:
        lora_module_list(text)
    except ValueError:
        raise _Refused() from None
    return text


def _json_object(value: Any) -> str:
    if not isinstance(value, dict):
        raise _Refused()
    return json.dumps(value)


#: option → (GREENFRONT_* variable, how to turn the value into its text; None: leave unset).
HONOURED: dict[str, tuple[str, Callable[[Any], str | None]]] = {
    "served_model_name": ("GREENFRONT_SERVED_MODEL_NAME", _names),
    "tokenizer": ("GREENFRONT_TOKENIZER", str),
    "api_key": ("GREENFRONT_API_KEY", _names),
    "chat_template": ("GREENFRONT_CHAT_TEMPLATE", str),
    "max_model_len": ("GREENFRONT_MAX_MODEL_LEN", str),
    "enable_log_requests": ("GREENFRONT_LOG_REQUESTS", _flag),
    "disable_log_stats": ("GREENFRONT_LOG_STATS", _not_flag),
    "engine_ready_timeout_secs": ("GREENFRONT_ENGINE_READY_TIMEOUT", str),
    "http_timeout_keep_alive": ("GREENFRONT_KEEPALIVE", str),
    "response_role": ("GREENFRONT_RESPONSE_ROLE", str),
    "anthropic_disabled_thinking_effort": ("GREENFRONT_ANTHROPIC_DISABLED_THINKING_EFFORT", str),
    "trust_request_chat_template": ("GREENFRONT_TRUST_REQUEST_CHAT_TEMPLATE", _flag),
    "enable_force_include_usage": ("GREENFRONT_ENABLE_FORCE_INCLUDE_USAGE", _flag),
    "enable_prompt_tokens_details": ("GREENFRONT_ENABLE_PROMPT_TOKENS_DETAILS", _flag),
    "max_logprobs": ("GREENFRONT_MAX_LOGPROBS", str),
    # An engine option (SchedulerConfig) that vLLM's output processor applies in the frontend.
    "stream_interval": ("GREENFRONT_STREAM_INTERVAL", str),
    "root_path": ("GREENFRONT_ROOT_PATH", str),
    "enable_server_load_tracking": ("GREENFRONT_ENABLE_SERVER_LOAD_TRACKING", _flag),
    "lora_modules": ("GREENFRONT_LORA_MODULES", _lora_modules),
    # Engine options (SchedulerConfig) whose admission limits vLLM's AsyncLLM applies.
    "max_num_queued_reqs": ("GREENFRONT_MAX_NUM_QUEUED_REQS", str),
    "max_num_queued_tokens": ("GREENFRONT_MAX_NUM_QUEUED_TOKENS", str),
    # An engine option in vLLM (EngineArgs), honoured by the frontend's drain: runtime/shutdown.
    "shutdown_timeout": ("GREENFRONT_SHUTDOWN_TIMEOUT", str),
    "allowed_origins": ("GREENFRONT_ALLOWED_ORIGINS", json.dumps),
    "allowed_methods": ("GREENFRONT_ALLOWED_METHODS", json.dumps),
    "allowed_headers": ("GREENFRONT_ALLOWED_HEADERS", json.dumps),
    "allow_credentials": ("GREENFRONT_ALLOW_CREDENTIALS", _flag),
    "enable_request_id_headers": ("GREENFRONT_ENABLE_REQUEST_ID_HEADERS", _flag),
    "ssl_keyfile": ("GREENFRONT_SSL_KEYFILE", str),
    "ssl_certfile": ("GREENFRONT_SSL_CERTFILE", str),
    "ssl_ca_certs": ("GREENFRONT_SSL_CA_CERTS", str),
    "ssl_cert_reqs": ("GREENFRONT_SSL_CERT_REQS", str),
    "generation_config": ("GREENFRONT_GENERATION_CONFIG", _generation_config),
    "uvicorn_log_level": ("GREENFRONT_LOG_LEVEL",
                          lambda v: {"critical": "error", "trace": "debug"}.get(v, v)),
    "enable_auto_tool_choice": ("GREENFRONT_ENABLE_AUTO_TOOL_CHOICE", _flag),
    "tool_call_parser": ("GREENFRONT_TOOL_CALL_PARSER", str),
    "tool_parser_plugin": ("GREENFRONT_TOOL_PARSER_PLUGIN", str),
    "reasoning_parser": ("GREENFRONT_REASONING_PARSER", str),
    "chat_template_content_format": ("", _chat_template_format),
    "structured_outputs_config": ("GREENFRONT_STRUCTURED_OUTPUTS_BACKEND",
                                  _structured_outputs_backend),
    "default_chat_template_kwargs": ("GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS", _json_object),
    "tokenizer_mode": ("", _tokenizer_mode),
    "enable_tokenizer_info_endpoint": ("GREENFRONT_ENABLE_TOKENIZER_INFO_ENDPOINT", _flag),
    "tokens_only": ("GREENFRONT_TOKENS_ONLY", _flag),
    "runner": ("", _generate_runner),
    "convert": ("", _generate_runner),
    "api_server_count": ("", _one_api_server),
    "fingerprint_mode": ("", _fingerprint_mode),
    "fingerprint_value": ("", lambda v: None),
    "return_tokens_as_token_ids": ("GREENFRONT_RETURN_TOKENS_AS_TOKEN_IDS", _flag),
    "exclude_tools_when_tool_choice_none": ("GREENFRONT_EXCLUDE_TOOLS_WHEN_TOOL_CHOICE_NONE",
                                            _flag),
    "sse_keep_alive_interval": ("GREENFRONT_SSE_KEEP_ALIVE_INTERVAL", _keep_alive_interval),
    "custom_histogram_buckets": ("GREENFRONT_CUSTOM_HISTOGRAM_BUCKETS", _histogram_buckets),
    "enable_per_request_metrics": ("GREENFRONT_ENABLE_PER_REQUEST_METRICS", _flag),
    # gRPC (docs/grpc.md): under vllm serve the socket comes as --grpc-listen-fd instead.
    "grpc_port": ("GREENFRONT_GRPC_PORT", str),
}

#: How ``greenfront serve`` takes an option on its command line when its converter does not
#: say (``_flag``: a switch, ``_names``: one or more values): vLLM's JSON-typed lists.
JSON_OPTIONS = frozenset({"allowed_origins", "allowed_methods", "allowed_headers"})


def arg_kind(name: str) -> str:
    """``flag``, ``list``, ``json`` or ``value``: the command-line shape of option ``name``."""
    convert = HONOURED[name][1]
    if name in JSON_OPTIONS:
        return "json"
    if convert in (_flag, _not_flag):
        return "flag"
    if convert in (_names, _lora_modules):
        return "list"
    return "value"


#: Frontend options that need no setting: the HTTP socket is inherited, docs do not exist,
#: greenfront writes no uvicorn access log, /inference/v1/generate (what --enable-scale-out
#: turns on) is always served, and the rest are read directly from the command line. Also
#: vllm serve's own process options (its config file, its DP supervisor), and what only shapes
#: multimodal input or model code, which a text-only frontend that reads ``tokenizer.json`` has
#: none of.
NO_EFFECT = frozenset({"host", "port", "model", "model_tag", "disable_uvicorn_access_log",
                       "disable_fastapi_docs", "enable_offline_docs", "max_log_len",
                       "log_error_stack", "headless", "enable_scale_out", "config",
                       "data_parallel_supervisor_port", "dp_supervisor_probe_failure_threshold",
                       "dp_supervisor_probe_interval_s", "dp_supervisor_probe_timeout_s",
                       "allowed_local_media_path", "allowed_media_domains",
                       "limit_mm_per_prompt", "media_io_kwargs", "mm_processor_kwargs",
                       "language_model_only", "trust_remote_code", "renderer_num_workers",
                       # vllm serve binds the unix socket and hands it over like a TCP one
                       "uds"})


class UnsupportedOptions(ValueError):
    """Frontend options greenfront does not implement were given."""

    def __init__(self, names: list[str],
                 hint: str = "set VLLM_USE_RUST_FRONTEND=0 to use vLLM's Python frontend") -> None:
        super().__init__(
            "greenfront does not implement these vllm serve frontend options: "
            + ", ".join(f"--{n.replace('_', '-')}" for n in names)
            + f". Remove them, or {hint}.")
        self.names = names


def settings_from_args_json(text: str) -> dict[str, str]:
    """The ``GREENFRONT_*`` settings that ``--args-json`` asks for.

    Raises:
        ValueError: the JSON is not an object or has no model.
        UnsupportedOptions: it sets frontend options greenfront does not implement.
    """
    args = json.loads(text)
    if not isinstance(args, dict):
        raise ValueError("--args-json must be a JSON object")
    model = args.get("model_tag") or args.get("model")
    if not model:
        raise ValueError("--args-json has no model_tag")
    if args.get("enable_per_request_metrics") and args.get("disable_log_stats"):
        raise ValueError("Error: --enable-per-request-metrics requires engine statistics "
                         "logging; remove --disable-log-stats to enable per-request metrics.")
    settings = {"GREENFRONT_MODEL": str(model)}
    refused = sorted(k for k in args if k in UNSUPPORTED)
    for key, value in args.items():
        if key not in HONOURED:
            continue
        name, convert = HONOURED[key]
        try:
            text_value = convert(value) if value is not None else None
        except _Refused:
            refused.append(key)
            continue
        if name and text_value is not None:
            settings[name] = text_value
    if "GREENFRONT_SERVED_MODEL_NAME" not in settings:
        settings["GREENFRONT_SERVED_MODEL_NAME"] = str(model)
    fingerprint = _fingerprint(args)
    if fingerprint is not None:
        settings["GREENFRONT_SYSTEM_FINGERPRINT"] = fingerprint
    if refused:
        raise UnsupportedOptions(sorted(set(refused)))
    return settings
