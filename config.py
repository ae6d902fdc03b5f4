"""The one place that reads environment variables: a frozen ``Config`` built once.

Everything else receives the ``Config`` (or values taken from it); no other module reads
``os.environ``. A value that does not parse is logged as a warning and the default is used,
so a typo never stops a server from starting.

Runs on: import time of the gunicorn master (gunicorn.conf.py) and of each worker (app.py).
"""
from __future__ import annotations

import functools
import json
import logging
import os
import socket
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Mapping, TypeVar

log = logging.getLogger("greenfront.config")

T = TypeVar("T")

REQUEST_THREADS_ENV = "GREENFRONT_REQUEST_WORKER_THREADS"
REQUEST_THREADS_FALLBACK_ENV = "VLLM_RS_REQUEST_WORKER_THREADS"
ZMQ_THREADS_ENV = "GREENFRONT_ZMQ_WORKER_THREADS"
ZMQ_THREADS_FALLBACK_ENV = "VLLM_RS_ZMQ_WORKER_THREADS"
#: PERF: gevent-physics.md §3: more pool threads than cores doubles the /health tail.
REQUEST_THREADS_CAP = 32
#: ZMQ I/O threads: 4 as vllm-rs does; more only pays off with many engines.
ZMQ_THREADS_DEFAULT = 4
#: gevent-physics.md §1: 0.5 ms bounds the hub's lateness while pool threads run Python
#: (jinja2) at a ~10% cost to that work.
SWITCH_INTERVAL_DEFAULT = 0.0005
POOL_NICE_DEFAULT = 10
#: vLLM 0.32's ``--structured-outputs-config`` backends.
STRUCTURED_OUTPUTS_BACKENDS = ("auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer")

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL_DIR = os.path.join(HERE, "models", "tekken-tiny")


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError("must be >= 1")
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def _non_negative_float(raw: str) -> float:
    value = float(raw)
    if not value >= 0:
        raise ValueError("must be >= 0")
    return value


def _nice(raw: str) -> int:
    value = int(raw)
    if not 0 <= value <= 19:
        raise ValueError("must be a niceness from 0 to 19")
    return value


def _bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be 0/1/true/false")


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return raw
    return parse


def _json_object(raw: str) -> dict:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    return value


def _names(raw: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    if not names:
        raise ValueError("empty list")
    return names


class _Reader:
    """Reads typed values from an environment mapping, warning on bad ones."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def get(self, names: str | tuple[str, ...], parse: Callable[[str], T], default: T) -> T:
        for name in (names,) if isinstance(names, str) else names:
            raw = self.env.get(name)
            if raw is None or raw == "":
                continue
            try:
                return parse(raw)
            except ValueError as exc:
                log.warning("ignoring %s=%r (%s); using %r", name, raw, exc, default)
                return default
        return default


@dataclass(frozen=True)
class Config:
    """Every setting of greenfront. See the README's table for the variables."""

    model: str = DEFAULT_MODEL_DIR
    served_model_names: tuple[str, ...] = ()
    tokenizer_backend: str = "fastokens"
    max_model_len: int | None = None
    request_threads: int = 1
    zmq_threads: int = ZMQ_THREADS_DEFAULT
    offload: bool = True
    switch_interval: float = SWITCH_INTERVAL_DEFAULT
    pool_nice: int = POOL_NICE_DEFAULT
    engine_mode: str = "sim"
    engine_start: int = 0
    engine_count: int = 1
    input_fd: int | None = None
    output_fd: int | None = None
    coordinator_address: str = ""
    exit_on_engine_death: bool = False
    tokenizer: str = ""
    chat_template: str = ""
    log_requests: bool = False
    log_stats: bool = True
    log_stats_interval: float = 10.0
    keepalive: int = 5
    response_role: str = "assistant"
    trust_request_chat_template: bool = False
    enable_force_include_usage: bool = False
    enable_prompt_tokens_details: bool = False
    max_logprobs: int = 20
    use_generation_config: bool = True
    structured_outputs_backend: str = "auto"
    default_chat_template_kwargs: dict = field(default_factory=dict)
    hf_hub_cache: str = ""
    handshake_address: str = ""
    engine_host: str = ""
    run_dir: str = ""
    worker_slot: int = 0
    worker_count: int = 1
    sim_args: str = ""
    engine_ready_timeout: float = 600.0
    accept_wait: float = 10.0
    max_body_bytes: int = 256 * 1024 * 1024
    system_fingerprint: str | None = "greenfront-0.1.0"
    api_keys: tuple[str, ...] = ()
    # Admin plumbing (resources/admin): dev-mode routes and runtime LoRA updates.
    server_dev_mode: bool = False
    allow_runtime_lora_updating: bool = False
    runtime_lora_allowed_path_prefixes: tuple[str, ...] = ()
    bind: str = "127.0.0.1:8000"
    log_level: str = "info"
    extra: dict = field(default_factory=dict)

    @property
    def model_dir(self) -> str:
        """The model as a local directory (see ``resolve_local``)."""
        return self.resolve_local(self.model)

    @property
    def tokenizer_dir(self) -> str:
        """Where the tokenizer files are: ``tokenizer`` if set, else the model directory."""
        return self.resolve_local(self.tokenizer or self.model)

    def resolve_local(self, name: str) -> str:
        """A local directory for a model path or hub id: the path itself, or the id's snapshot
        in the Hugging Face cache. No network: an id resolves only if something (``vllm serve``)
        already downloaded it; otherwise it is returned unchanged and loading fails clearly."""
        if os.path.isdir(name):
            return os.path.abspath(name)
        repo = os.path.join(self.hf_hub_cache, "models--" + name.replace("/", "--"))
        try:
            with open(os.path.join(repo, "refs", "main")) as f:
                snapshot = os.path.join(repo, "snapshots", f.read().strip())
            if os.path.isdir(snapshot):
                return snapshot
        except OSError:
            pass
        snapshots = os.path.join(repo, "snapshots")
        if os.path.isdir(snapshots):
            for entry in sorted(os.listdir(snapshots)):
                return os.path.join(snapshots, entry)
        return name

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

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Config":
        env = os.environ if env is None else env
        r = _Reader(env)
        cpus = os.cpu_count() or 1
        names = r.get("GREENFRONT_SERVED_MODEL_NAME", _names, ())
        max_len = r.get("GREENFRONT_MAX_MODEL_LEN", _positive_int, 0) or None
        keys = r.get(("GREENFRONT_API_KEY", "VLLM_API_KEY"), _names, ())
        return cls(
            model=r.get("GREENFRONT_MODEL", str, DEFAULT_MODEL_DIR),
            served_model_names=names,
            tokenizer_backend=r.get("GREENFRONT_TOKENIZER_BACKEND", _choice("fastokens", "hf"),
                                    "fastokens"),
            max_model_len=max_len,
            request_threads=min(REQUEST_THREADS_CAP, r.get(
                (REQUEST_THREADS_ENV, REQUEST_THREADS_FALLBACK_ENV), _positive_int, cpus)),
            zmq_threads=r.get((ZMQ_THREADS_ENV, ZMQ_THREADS_FALLBACK_ENV), _positive_int,
                              ZMQ_THREADS_DEFAULT),
            offload=r.get("GREENFRONT_OFFLOAD", _bool, True),
            switch_interval=r.get("GREENFRONT_SWITCH_INTERVAL", _non_negative_float,
                                  SWITCH_INTERVAL_DEFAULT),
            pool_nice=r.get("GREENFRONT_POOL_NICE", _nice, POOL_NICE_DEFAULT),
            engine_mode=r.get("GREENFRONT_ENGINE", _choice("sim", "external", "launched"), "sim"),
            engine_start=r.get("GREENFRONT_ENGINE_START", _non_negative_int, 0),
            engine_count=r.get("GREENFRONT_ENGINE_COUNT", _positive_int, 1),
            input_fd=r.get("GREENFRONT_INPUT_FD", _non_negative_int, None),
            output_fd=r.get("GREENFRONT_OUTPUT_FD", _non_negative_int, None),
            coordinator_address=r.get("GREENFRONT_COORDINATOR_ADDRESS", str, ""),
            exit_on_engine_death=(r.get("GREENFRONT_ENGINE", str, "") == "launched"
                                  and not r.get("VLLM_KEEP_ALIVE_ON_ENGINE_DEATH", _bool, False)),
            tokenizer=r.get("GREENFRONT_TOKENIZER", str, ""),
            chat_template=r.get("GREENFRONT_CHAT_TEMPLATE", str, ""),
            log_requests=r.get("GREENFRONT_LOG_REQUESTS", _bool, False),
            log_stats=r.get("GREENFRONT_LOG_STATS", _bool, True),
            log_stats_interval=r.get("VLLM_LOG_STATS_INTERVAL", _non_negative_float, 10.0) or 10.0,
            keepalive=r.get(("GREENFRONT_KEEPALIVE", "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"),
                            _non_negative_int, 5),
            response_role=r.get("GREENFRONT_RESPONSE_ROLE", str, "assistant"),
            trust_request_chat_template=r.get("GREENFRONT_TRUST_REQUEST_CHAT_TEMPLATE", _bool,
                                              False),
            enable_force_include_usage=r.get("GREENFRONT_ENABLE_FORCE_INCLUDE_USAGE", _bool,
                                             False),
            enable_prompt_tokens_details=r.get("GREENFRONT_ENABLE_PROMPT_TOKENS_DETAILS", _bool,
                                               False),
            max_logprobs=r.get("GREENFRONT_MAX_LOGPROBS", int, 20),
            hf_hub_cache=r.get("HF_HUB_CACHE", str, "") or os.path.join(
                r.get("HF_HOME", str, "") or os.path.join(os.path.expanduser("~"), ".cache",
                                                         "huggingface"), "hub"),
            use_generation_config=r.get("GREENFRONT_GENERATION_CONFIG",
                                        _choice("auto", "vllm"), "auto") == "auto",
            structured_outputs_backend=r.get("GREENFRONT_STRUCTURED_OUTPUTS_BACKEND",
                                             _choice(*STRUCTURED_OUTPUTS_BACKENDS), "auto"),
            default_chat_template_kwargs=r.get("GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS",
                                               _json_object, {}),
            handshake_address=r.get("GREENFRONT_HANDSHAKE_ADDRESS", str, ""),
            engine_host=r.get("GREENFRONT_ENGINE_HOST", str, ""),
            run_dir=r.get("GREENFRONT_RUN_DIR", str, ""),
            worker_slot=r.get("GREENFRONT_WORKER_SLOT", int, 0),
            worker_count=r.get("GREENFRONT_WORKERS", _positive_int, 1),
            sim_args=r.get("GREENFRONT_SIM_ARGS", str, ""),
            engine_ready_timeout=r.get(("GREENFRONT_ENGINE_READY_TIMEOUT",
                                        "VLLM_ENGINE_READY_TIMEOUT_S"), _non_negative_float, 600.0),
            accept_wait=r.get("GREENFRONT_ACCEPT_WAIT", _non_negative_float, 10.0),
            max_body_bytes=r.get("GREENFRONT_MAX_BODY_BYTES", _positive_int, 256 * 1024 * 1024),
            system_fingerprint=r.get("GREENFRONT_SYSTEM_FINGERPRINT", str, "greenfront-0.1.0") or None,
            api_keys=keys,
            server_dev_mode=r.get("VLLM_SERVER_DEV_MODE", _bool, False),
            allow_runtime_lora_updating=r.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING", _bool,
                                              False),
            runtime_lora_allowed_path_prefixes=r.get(
                "VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES", _names, ()),
            bind=r.get("GREENFRONT_BIND", str, "127.0.0.1:8000"),
            log_level=r.get("GREENFRONT_LOG_LEVEL", _choice("debug", "info", "warning", "error"),
                            "info"),
        )

    def with_run_dir(self) -> "Config":
        """A copy whose ``run_dir`` exists (a fresh temporary folder when unset)."""
        if self.run_dir:
            os.makedirs(self.run_dir, exist_ok=True)
            return self
        from dataclasses import replace
        return replace(self, run_dir=tempfile.mkdtemp(prefix="greenfront-"))


@functools.cache
def reachable_host() -> str:
    """An address of this host that other hosts can connect to: the one its default route
    leaves from (connecting a UDP socket sends nothing), else what the host name resolves to."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())
