"""The one place that reads environment variables: a frozen ``Config`` built once.

Every setting is declared once, as a field of ``Config`` made by ``settings.setting(...)``: its
environment names (the first wins; later ones are fallbacks, e.g. vLLM's or vllm-rs's names), the
parser, the default and a one-line description. From these declarations come ``Config.from_env``, the
table of ``docs/settings.md`` (``python -m base.settings_page`` rewrites it;
``tests/unit/test_config.py`` fails when it is stale) and the redacted config that
``GET /server_info`` reports.

Adding a setting is one declaration::

    my_knob: int = setting(("GREENFRONT_MY_KNOB",), positive_int, 8,
                           "what it changes, for docs/settings.md")

then ``.venv/bin/python -m base.settings_page`` to regenerate the table of docs/settings.md.
Pass ``shown=`` when the default needs words (a computed default), ``secret=True`` for values
``/server_info`` must not show, ``empty_is_value=True`` when an empty variable means something
(otherwise it is unset).

Everything else receives the ``Config`` (or values taken from it); no other module reads
``os.environ``. A value that does not parse is logged as a warning and the default is used,
so a typo never stops a server from starting.

Runs on: import time of the gunicorn master (gunicorn.conf.py) and of each worker (app.py).
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from base.frontend_options import FrontendOptions
from base.grpc_settings import GrpcSettings
from base.host import WORKERS_CAP, default_worker_count, local_model_dir, reachable_host
from base.messages_settings import MessagesSettings
from base.parity_settings import ParitySettings
from base.responses_settings import ResponsesSettings
from base.settings import (  # noqa: F401  (the parsers are re-exported for declarations elsewhere)
    REQUEST_THREADS_CAP, Setting, boolean, capped_threads, choice, fingerprint, gc_thresholds,
    generation_config, json_object, json_strings, lora_module_list, names, niceness,
    non_negative_float, non_negative_int, positive_float, positive_int, setting,
)

#: 0.5 ms bounds the hub's lateness while pool threads run Python (jinja2) at a ~10% cost to
#: that work (docs/architecture.md §5.1).
SWITCH_INTERVAL_DEFAULT = 0.0005
#: PERF: Python's default (700, 10, 10) collected ~60 times a second under 1,024 streams, every
#: ~5 s over the whole heap: 11% of a worker's CPU in collections that found nothing once the
#: request graph's cycle was gone (``Cancellation.discard``); at these thresholds ~2%
#: (gc.callbacks timing, make bench's stream phase). Objects die by reference counting anyway.
GC_THRESHOLD_DEFAULT = (20000, 50, 20)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
DEFAULT_MODEL_DIR = os.path.join(HERE, "models", "tekken-tiny")


@dataclass(frozen=True)
class Config(FrontendOptions, GrpcSettings, MessagesSettings, ParitySettings,
             ResponsesSettings):
    """Every setting of greenfront, each declared once (docs/settings.md's table is made from
    these)."""

    model: str = setting(
        ("GREENFRONT_MODEL",), str, DEFAULT_MODEL_DIR,
        "local Hugging Face model directory (`tokenizer.json`, `tokenizer_config.json`, "
        "`generation_config.json`), or a hub id already in the Hugging Face cache",
        shown="`models/tekken-tiny`")
    served_model_names: tuple[str, ...] = setting(
        ("GREENFRONT_SERVED_MODEL_NAME",), names, (),
        "comma-separated names; the first is used in responses",
        shown="the model path (`make run`: `tiny`)")
    tokenizer: str = setting(
        ("GREENFRONT_TOKENIZER",), str, "",
        "tokenizer directory or hub id (`--tokenizer`)", shown="the model")
    tokenizer_backend: str = setting(
        ("GREENFRONT_TOKENIZER_BACKEND",), choice("fastokens", "hf"), "fastokens",
        "`fastokens` (fast Rust BPE, same ids) or `hf` (Hugging Face `tokenizers`, the reference)")
    chat_template: str = setting(
        ("GREENFRONT_CHAT_TEMPLATE",), str, "",
        "a chat template file or the template itself (`--chat-template`)",
        shown="the model's")
    max_model_len: int | None = setting(
        ("GREENFRONT_MAX_MODEL_LEN",), positive_int, None,
        "cap on the context length the engines report", shown="the engines'")
    request_threads: int = setting(
        ("GREENFRONT_REQUEST_WORKER_THREADS", "VLLM_RS_REQUEST_WORKER_THREADS"), capped_threads,
        min(REQUEST_THREADS_CAP, os.cpu_count() or 1),
        "request-pool threads per worker (per lane when `GREENFRONT_POOL_NICE` is set: as "
        "many again for light work)", shown=f"CPUs, capped at {REQUEST_THREADS_CAP}")
    zmq_threads: int = setting(
        ("GREENFRONT_ZMQ_WORKER_THREADS", "VLLM_RS_ZMQ_WORKER_THREADS"), positive_int, 4,
        "libzmq I/O threads of the engine client (4 as vllm-rs; more pays only with many engines)")
    offload: bool = setting(
        ("GREENFRONT_OFFLOAD",), boolean, True,
        "`0` runs request work inline in the HTTP hub (the benchmark baseline)")
    switch_interval: float = setting(
        ("GREENFRONT_SWITCH_INTERVAL",), non_negative_float, SWITCH_INTERVAL_DEFAULT,
        "`sys.setswitchinterval`, bounds how long a pool thread holds the GIL")
    gc_threshold: tuple[int, int, int] = setting(
        ("GREENFRONT_GC_THRESHOLD",), gc_thresholds, GC_THRESHOLD_DEFAULT,
        "a worker's `gc.set_threshold` (three comma-separated numbers)", shown="`20000,50,20`")
    pool_nice: int = setting(
        ("GREENFRONT_POOL_NICE",), niceness, 10,
        "niceness of the request-pool threads that take heavy work (a body over 16 KiB), so the "
        "HTTP hub and engine I/O get a contended core first; light work has threads at the "
        "process's niceness (0: one lane, all at the process's)")
    engine_mode: str = setting(
        ("GREENFRONT_ENGINE",), choice("sim", "external", "launched"), "sim",
        "`sim`: start the built-in simulator; `external`: wait for engines to handshake; "
        "`launched`: set by `bin/greenfront frontend` under `vllm serve`")
    engine_start: int = setting(
        ("GREENFRONT_ENGINE_START",), non_negative_int, 0,
        "first DP rank of the engines (set by `bin/greenfront frontend`)")
    engine_count: int = setting(
        ("GREENFRONT_ENGINE_COUNT",), positive_int, 1, "engines (DP ranks 0…N-1) expected")
    input_fd: int | None = setting(
        ("GREENFRONT_INPUT_FD",), non_negative_int, None,
        "inherited engine request listener (set by `bin/greenfront frontend`)")
    output_fd: int | None = setting(
        ("GREENFRONT_OUTPUT_FD",), non_negative_int, None,
        "inherited engine output listener (set by `bin/greenfront frontend`)")
    coordinator_address: str = setting(
        ("GREENFRONT_COORDINATOR_ADDRESS",), str, "",
        "the DP coordinator's address (set by `bin/greenfront frontend`)")
    keep_alive_on_engine_death: bool = setting(
        ("VLLM_KEEP_ALIVE_ON_ENGINE_DEATH",), boolean, False,
        "launched by `vllm serve`: `1` keeps serving (503) after the engine died instead of "
        "exiting")
    log_requests: bool = setting(
        ("GREENFRONT_LOG_REQUESTS",), boolean, False, "log each request (`--enable-log-requests`)")
    log_stats: bool = setting(
        ("GREENFRONT_LOG_STATS",), boolean, True,
        "periodic engine stats log lines (`--disable-log-stats` sets `0`)")
    log_stats_interval: float = setting(
        ("VLLM_LOG_STATS_INTERVAL",), positive_float, 10.0,
        "seconds between the engine stats log lines")
    keepalive: int = setting(
        ("GREENFRONT_KEEPALIVE", "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"), non_negative_int, 5,
        "seconds an idle HTTP keep-alive connection is kept")
    response_role: str = setting(
        ("GREENFRONT_RESPONSE_ROLE",), str, "assistant",
        "role of the generated chat message (`--response-role`)")
    trust_request_chat_template: bool = setting(
        ("GREENFRONT_TRUST_REQUEST_CHAT_TEMPLATE",), boolean, False,
        "accept a request's own `chat_template` (`--trust-request-chat-template`)")
    enable_force_include_usage: bool = setting(
        ("GREENFRONT_ENABLE_FORCE_INCLUDE_USAGE",), boolean, False,
        "usage in every streamed response (`--enable-force-include-usage`)")
    enable_prompt_tokens_details: bool = setting(
        ("GREENFRONT_ENABLE_PROMPT_TOKENS_DETAILS",), boolean, False,
        "`prompt_tokens_details` in usage (`--enable-prompt-tokens-details`)")
    max_logprobs: int = setting(
        ("GREENFRONT_MAX_LOGPROBS",), int, 20, "largest `logprobs` a request may ask for "
        "(`--max-logprobs`; -1: the vocabulary size)")
    max_num_queued_reqs: int | None = setting(
        ("GREENFRONT_MAX_NUM_QUEUED_REQS",), non_negative_int, None, "most engine requests in "
        "flight in the deployment, `n` counting `n` (`--max-num-queued-reqs`); more: 503")
    max_num_queued_tokens: int | None = setting(
        ("GREENFRONT_MAX_NUM_QUEUED_TOKENS",), non_negative_int, None, "prompt tokens awaiting "
        "a first output in the deployment that refuse new requests (`--max-num-queued-tokens`)")
    root_path: str = setting(
        ("GREENFRONT_ROOT_PATH",), str, "", "path prefix a proxy forwards (`--root-path`): "
        "`<prefix>/v1/...` is served as `/v1/...`; `/openapi.json` names it as its server")
    enable_server_load_tracking: bool = setting(
        ("GREENFRONT_ENABLE_SERVER_LOAD_TRACKING",), boolean, False, "`/load` counts completions "
        "and chat requests in flight, as vLLM (`--enable-server-load-tracking`); else engine ones")
    lora_modules: tuple = setting(
        ("GREENFRONT_LORA_MODULES",), lora_module_list, (), "LoRA adapters loaded at start-up "
        "(`--lora-modules`): a JSON list of `{name, path, base_model_name?}`", shown="none")
    stream_interval: int = setting(
        ("GREENFRONT_STREAM_INTERVAL",), positive_int, 1, "output tokens a stream batches per "
        "chunk (`--stream-interval`); a request's `stream_interval` can only raise it")
    max_n: int = setting(
        ("VLLM_MAX_N_SEQUENCES",), positive_int, 16384, "largest `n` a request may ask for")
    max_completion_prompts: int = setting(
        ("VLLM_MAX_COMPLETION_PROMPTS",), positive_int, 1024,
        "most prompts in one /v1/completions request")
    max_stop_strings: int = setting(
        ("VLLM_MAX_STOP_STRINGS",), non_negative_int, 4,
        "most `stop` strings a chat or completion request may give")
    default_chat_template_kwargs: dict | None = setting(
        ("GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS",), json_object, None,
        "a JSON object of chat template variables every chat request starts from "
        "(`--default-chat-template-kwargs`; vLLM's `cohere_format: cmd4` is added unless "
        "given); request `chat_template_kwargs` override them, except None or `auto` values")
    structured_outputs_backend: str = setting(
        ("GREENFRONT_STRUCTURED_OUTPUTS_BACKEND",),
        choice("auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer"), "auto",
        "the structured-outputs backend the engine requests name (`--structured-outputs-config`"
        "'s `backend`): `auto` picks xgrammar per request, guidance for what xgrammar cannot "
        "do, as vLLM does; `xgrammar`, `guidance`, `outlines`, `lm-format-enforcer`")
    use_generation_config: bool = setting(
        ("GREENFRONT_GENERATION_CONFIG",), generation_config, True,
        "`auto`: sampling defaults from the model's `generation_config.json`; `vllm`: none "
        "(`--generation-config`)", shown="`auto`")
    hf_home: str = setting(
        ("HF_HOME",), str, os.path.join(os.path.expanduser("~"), ".cache", "huggingface"),
        "Hugging Face home; its `hub` folder is the cache when `HF_HUB_CACHE` is unset",
        shown="`~/.cache/huggingface`")
    hf_hub_cache_dir: str = setting(
        ("HF_HUB_CACHE",), str, "",
        "Hugging Face hub cache where hub ids are looked up (no download)",
        shown="`$HF_HOME/hub`")
    handshake_address: str = setting(
        ("GREENFRONT_HANDSHAKE_ADDRESS",), str, "",
        "where engines connect (HELLO/INIT/READY); required for `external`, e.g. "
        "`tcp://0.0.0.0:13345`", shown="an ipc path in the run dir")
    engine_host: str = setting(
        ("GREENFRONT_ENGINE_HOST",), str, "",
        "the host engines are told to connect to; with a TCP handshake address on port P, "
        "worker slot s listens on P+1+2s (requests) and P+2+2s (outputs)",
        shown="the handshake host, or this host's outbound address when that is a wildcard")
    run_dir: str = setting(
        ("GREENFRONT_RUN_DIR",), str, "",
        "ipc sockets and shared engine registrations of one deployment",
        shown="a fresh temp dir")
    worker_count: int = setting(
        ("GREENFRONT_WORKERS",), positive_int, default_worker_count(),
        "gunicorn worker count, standalone and under `vllm serve` alike (docs/deployment.md §2)",
        shown=f"usable CPUs, capped by memory and at {WORKERS_CAP}")
    sim_args: str = setting(
        ("GREENFRONT_SIM_ARGS",), str, "",
        "extra simulator options, e.g. `--output-mode echo --itl-ms 5` "
        "(`python -m engine.sim --help`)")
    engine_ready_timeout: float = setting(
        ("GREENFRONT_ENGINE_READY_TIMEOUT", "VLLM_ENGINE_READY_TIMEOUT_S"), non_negative_float,
        600.0, "seconds to wait for engine registration")
    accept_wait: float = setting(
        ("GREENFRONT_ACCEPT_WAIT",), non_negative_float, 10.0,
        "seconds a starting worker waits for the engines to register before it accepts "
        "connections (a restarted worker then takes no request it could only answer with 503); "
        "after that it serves, `/health` answering 503 until they register")
    engine_stall_timeout: float = setting(
        ("GREENFRONT_ENGINE_STALL_TIMEOUT",), non_negative_float, 60.0,
        "seconds an engine may say nothing while this worker has requests in flight on it, or "
        "leave a ping unanswered, before it counts as stalled (0: never); see "
        "docs/operations.md §4")
    engine_stall_liveness_timeout: float = setting(
        ("GREENFRONT_ENGINE_STALL_LIVENESS_TIMEOUT",), non_negative_float, 300.0,
        "seconds of silence of a stalled engine after which `/health` answers 503, so an "
        "orchestrator restarts the deployment (0: never)")
    client_stall_timeout: float = setting(
        ("GREENFRONT_CLIENT_STALL_TIMEOUT",), non_negative_float, 30.0,
        "seconds a response's write may stay blocked by a client that reads nothing before the "
        "connection is shut and its engine requests aborted (0: never); see "
        "docs/operations.md §5")
    shutdown_timeout: float = setting(
        ("GREENFRONT_SHUTDOWN_TIMEOUT",), non_negative_float, 0.0,
        "seconds in-flight requests may finish after SIGTERM (`--shutdown-timeout`); new "
        "requests get 503 meanwhile; `0` aborts them at once, as vLLM's default")
    max_body_bytes: int = setting(
        ("GREENFRONT_MAX_BODY_BYTES",), positive_int, 256 * 1024 * 1024,
        "larger request bodies get 413")
    ready_max_hub_lag: float = setting(
        ("GREENFRONT_READY_MAX_HUB_LAG",), non_negative_float, 1.0,
        "seconds of HTTP-hub lag (the largest of the last second) above which `/ready` answers "
        "503; 0: never")
    hub_lag_interval: float = setting(
        ("GREENFRONT_HUB_LAG_INTERVAL",), positive_float, 0.1,
        "seconds between the hub-lag monitor's samples")
    metrics_dir: str = setting(
        ("PROMETHEUS_MULTIPROC_DIR",), str, "",
        "where every worker writes its metric values, so that any worker's `/metrics` reports "
        "the whole deployment (prometheus-client's multiprocess mode; a directory you set must "
        "be emptied between runs)", shown="`<run dir>/prometheus`")
    metrics_flush_interval: float = setting(
        ("GREENFRONT_METRICS_FLUSH_INTERVAL",), positive_float, 0.1,
        "seconds between writes of a thread's gathered metric updates to the shared files (a "
        "scrape lags the work by at most this)")
    system_fingerprint: str | None = setting(
        ("GREENFRONT_SYSTEM_FINGERPRINT",), fingerprint, "greenfront-0.1.0",
        "`system_fingerprint` in responses (empty: null)", empty_is_value=True)
    api_keys: tuple[str, ...] = setting(
        ("GREENFRONT_API_KEY", "VLLM_API_KEY"), names, (),
        "comma-separated keys for `Authorization: Bearer`, required on the paths vLLM guards "
        "(`/v1`, `/v2`, `/inference`, `/cohere`; docs/api.md §1)", secret=True)
    server_dev_mode: bool = setting(
        ("VLLM_SERVER_DEV_MODE",), boolean, False,
        "`1` adds the dev routes (`/sleep`, `/wake_up`, `/is_sleeping`, `/pause`, `/resume`, "
        "`/reset_prefix_cache`, `/collective_rpc`, `/server_info`, …)")
    allow_runtime_lora_updating: bool = setting(
        ("VLLM_ALLOW_RUNTIME_LORA_UPDATING",), boolean, False,
        "`/v1/load_lora_adapter` and `/v1/unload_lora_adapter`")
    runtime_lora_allowed_path_prefixes: tuple[str, ...] = setting(
        ("VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES",), names, (),
        "local LoRA adapter paths must be under a listed prefix when set")
    enable_auto_tool_choice: bool = setting(
        ("GREENFRONT_ENABLE_AUTO_TOOL_CHOICE",), boolean, False,
        "vLLM's `--enable-auto-tool-choice`: with a tool call parser, serves `tool_choice` "
        "`auto`/`required`/named")
    tool_call_parser: str = setting(
        ("GREENFRONT_TOOL_CALL_PARSER",), str, "",
        "vLLM's `--tool-call-parser NAME` (`text/tool_parsers/`); an unknown name or a "
        "tokenizer without its markers stops the start", shown="none")
    tool_parser_plugin: str = setting(
        ("GREENFRONT_TOOL_PARSER_PLUGIN",), str, "",
        "vLLM's `--tool-parser-plugin`: a Python file that registers a parser class with "
        "`text.tool_parsers.register_tool_parser`", shown="none")
    reasoning_parser: str = setting(
        ("GREENFRONT_REASONING_PARSER",), str, "",
        "vLLM's `--reasoning-parser NAME` (`text/reasoning/`): `message.reasoning`, "
        "`delta.reasoning`, reasoning token counts", shown="none")
    allowed_origins: tuple[str, ...] = setting(
        ("GREENFRONT_ALLOWED_ORIGINS",), json_strings, (),
        "CORS: a JSON list of allowed origins, `[\"*\"]` for any (`--allowed-origins`)")
    allowed_methods: tuple[str, ...] = setting(
        ("GREENFRONT_ALLOWED_METHODS",), json_strings, ("*",),
        "CORS: a JSON list of allowed methods (`--allowed-methods`)", shown='`["*"]`')
    allowed_headers: tuple[str, ...] = setting(
        ("GREENFRONT_ALLOWED_HEADERS",), json_strings, ("*",),
        "CORS: a JSON list of allowed headers (`--allowed-headers`)", shown='`["*"]`')
    allow_credentials: bool = setting(
        ("GREENFRONT_ALLOW_CREDENTIALS",), boolean, False,
        "CORS: allow credentials (`--allow-credentials`)")
    enable_request_id_headers: bool = setting(
        ("GREENFRONT_ENABLE_REQUEST_ID_HEADERS",), boolean, False,
        "`X-Request-Id` on every response: the request's, else a fresh uuid4 hex "
        "(`--enable-request-id-headers`)")
    ssl_keyfile: str = setting(
        ("GREENFRONT_SSL_KEYFILE",), str, "", "TLS private key file (`--ssl-keyfile`)")
    ssl_certfile: str = setting(
        ("GREENFRONT_SSL_CERTFILE",), str, "", "TLS certificate file (`--ssl-certfile`); with "
        "a key, gunicorn serves HTTPS")
    ssl_ca_certs: str = setting(
        ("GREENFRONT_SSL_CA_CERTS",), str, "", "CA certificates for client certificates "
        "(`--ssl-ca-certs`)")
    ssl_cert_reqs: int = setting(
        ("GREENFRONT_SSL_CERT_REQS",), non_negative_int, 0,
        "whether client certificates are required: 0 none, 1 optional, 2 required "
        "(`--ssl-cert-reqs`)")
    bind: str = setting(
        ("GREENFRONT_BIND",), str, "127.0.0.1:8000", "gunicorn bind address")
    log_level: str = setting(
        ("GREENFRONT_LOG_LEVEL",), choice("debug", "info", "warning", "error"), "info",
        "gunicorn log level")

    #: This worker's slot among the deployment's workers (its engine client index): not a
    #: setting, the worker class hands it over (``runtime.worker.GreenfrontWorker.assign``).
    worker_slot: int = dataclasses.field(default=0)

    @classmethod
    def settings(cls) -> Iterator[tuple[str, Setting]]:
        """(field name, declaration) of every setting, in declaration order."""
        for f in dataclasses.fields(cls):
            if "setting" in f.metadata:
                yield f.name, f.metadata["setting"]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Config":
        env = os.environ if env is None else env
        return cls(**{name: decl.read(env) for name, decl in cls.settings()})

    @property
    def exit_on_engine_death(self) -> bool:
        """vLLM's frontends exit when their engine dies, unless kept alive."""
        return self.engine_mode == "launched" and not self.keep_alive_on_engine_death

    @property
    def hf_hub_cache(self) -> str:
        return self.hf_hub_cache_dir or os.path.join(self.hf_home, "hub")

    @property
    def model_dir(self) -> str:
        """The model as a local directory (see ``resolve_local``)."""
        return self.resolve_local(self.model)

    @property
    def tokenizer_dir(self) -> str:
        """Where the tokenizer files are: ``tokenizer`` if set, else the model directory."""
        return self.resolve_local(self.tokenizer or self.model)

    def resolve_local(self, name: str) -> str:
        """A local directory for a model path or hub id (``host.local_model_dir``, no network)."""
        return local_model_dir(name, self.hf_hub_cache)

    @property
    def relayed(self) -> bool:
        """Launched by ``vllm serve``: the workers reach the engines through ``engine.relay``,
        the one process that owns the inherited engine listeners. With one worker too: the
        relay starts before the master loads the tokenizers and forks, so the engines' queued
        connections are accepted at once (a worker adopting them 30+ s later, on a loaded
        machine, found connections the engines had given up on, and took their drop for an
        engine death)."""
        return self.engine_mode == "launched"

    @property
    def model_names(self) -> tuple[str, ...]:
        """Served names: the configured ones, else the model path (vLLM's default)."""
        return self.served_model_names or (self.model,)

    def worker_address(self, kind: str, slot: int) -> tuple[str, str]:
        """Where worker ``slot`` binds its engine socket ``kind`` ("in" or "out"), and the
        address the engines are told to connect to.

        With a TCP handshake address (engines may run on other hosts) the workers listen on the
        ports after it: slot s takes port+1+2s (in) and port+2+2s (out), fixed so that a
        restarted worker is found again at the address the engines already have. Otherwise
        (the built-in simulator, engines on this host) ipc paths in the run dir.
        """
        scheme, _, rest = self.handshake_address.partition("://")
        host, _, port = rest.rpartition(":")
        if scheme != "tcp" or not port.isdigit():
            path = f"ipc://{os.path.join(self.run_dir, f'{kind}-{slot}.sock')}"
            return path, path
        number = int(port) + 1 + 2 * slot + (0 if kind == "in" else 1)
        wildcard = host in ("*", "0.0.0.0", "[::]", "")
        advertised = self.engine_host or (reachable_host() if wildcard else host)
        bind_host = "*" if wildcard else host
        return f"tcp://{bind_host}:{number}", f"tcp://{advertised}:{number}"

    def for_worker(self, slot: int) -> "Config":
        """This configuration as worker ``slot`` serves with it."""
        return dataclasses.replace(self, worker_slot=slot)

    def with_run_dir(self) -> "Config":
        """A copy whose ``run_dir`` exists (a fresh temporary folder when unset)."""
        if self.run_dir:
            os.makedirs(self.run_dir, exist_ok=True)
            return self
        return dataclasses.replace(self, run_dir=tempfile.mkdtemp(prefix="greenfront-"))

    def redacted(self) -> dict[str, Any]:
        """Every setting as plain data (for ``/server_info``), secrets set as "<redacted>"."""
        out: dict[str, Any] = {}
        for name, decl in self.settings():
            value = getattr(self, name)
            if decl.secret and value:
                value = "<redacted>"
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out

    def vllm_env(self) -> dict[str, Any]:
        """The settings read from vLLM's own variable names (``/server_info``'s ``vllm_env``)."""
        out: dict[str, Any] = {}
        for name, decl in self.settings():
            if decl.env[0].startswith("VLLM_") and not decl.secret:
                value = getattr(self, name)
                out[decl.env[0]] = ",".join(value) if isinstance(value, tuple) else value
        return out
