"""Per-worker state: the model's text side, the engine client, and the serving context.

Built once per worker process after fork (``WorkerState.start`` from the worker class,
``runtime.worker``, or lazily on the first request). The ``ServingContext`` that request
conversion needs is made when every engine has registered, because ``max_model_len`` comes from
the engines.

Runs on: the HTTP hub (start/stop); ``serving_context`` is read from pool threads.
"""
from __future__ import annotations

import gc
import logging
import os
import time
from typing import Callable

import gevent

from base import token_ids
from base.config import Config
from engine.admission import Admission, SharedCounts
from engine.client import EngineClient
from runtime.hub_lag import HubLagMonitor
from runtime.lora_registry import adapter_lookup
from runtime.metrics import Metrics
from runtime.readiness import Readiness
from runtime.request_pool import get_pool, shutdown_pool
from runtime.serving_context import ServingContext
from runtime.worker_bus import WorkerBus

log = logging.getLogger("greenfront.state")

#: Longest a scrape waits for a worker's engine-I/O thread to hand over its pending figures.
FLUSH_WAIT = 0.5


class WorkerState:
    """Everything a worker process serves with. Resources hold a reference from build time."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.pid: int | None = None
        #: HTTP hub: called once every engine registered (app.py adds ``--lora-modules``' load);
        #: a hook that returns a greenlet delays accepting until it ends (``wait_for_engines``).
        self.engines_ready_hooks: list[Callable[[], object]] = []
        self._startup_work: list[gevent.Greenlet] = []
        #: Before a halt: end what is in flight with the error (None: already ended) and wait
        #: for the answers to be written (the worker's drain sets it, ``runtime.worker``).
        self.before_halt: Callable[[Exception | None], None] | None = None
        #: HTTP hub: completions and chat requests in flight (``middleware.load_tracking``).
        self.tracked_requests = 0
        self.model = None
        self.tokenizer = None
        self.chat_template = None
        self.output_parsers = None
        self.client: EngineClient | None = None
        #: ``--enable-server-load-tracking`` with several workers: each worker's count, shared.
        self._load_counts: SharedCounts | None = None
        #: The other workers of the deployment (``runtime.worker_bus``); None with one worker.
        self.bus: WorkerBus | None = None
        self._context = None
        self.started_at: float = 0.0
        self.metrics = Metrics(config.model_names[0], config.metrics_flush_interval,
                               config.custom_histogram_buckets)
        self.hub_lag = HubLagMonitor(config.hub_lag_interval, self.metrics.observe_hub_lag)
        #: What /ready answers from; the shutdown path and the stall detector feed it.
        self.readiness = Readiness(config.ready_max_hub_lag, engines=lambda: self.client,
                                   hub_lag=self.hub_lag.recent)

    # -- lifecycle --------------------------------------------------------------------------
    def ensure_started(self) -> None:
        if self.pid != os.getpid():
            self.start()

    def start(self) -> None:
        """Load the tokenizer and start the engine client (idempotent per process)."""
        if self.pid == os.getpid():
            return
        from text import loaded

        cfg = self.config
        self.pid = os.getpid()
        self.started_at = time.time()
        text = loaded.load(cfg.tokenizer_dir, cfg.tokenizer_backend, cfg.chat_template)
        self.model, self.tokenizer, self.chat_template = (text.model, text.tokenizer,
                                                          text.chat_template)
        self.output_parsers = self._load_output_parsers()
        if self.tokenizer.backend == "fastokens":
            token_ids.load_numpy()  # its prompts' ids are TokenIds: import numpy now, not mid-request
        get_pool(cfg)
        self.client = self._make_client()
        self.client.start()
        self._start_bus()
        if cfg.enable_server_load_tracking and cfg.worker_count > 1 and cfg.run_dir:
            self._load_counts = SharedCounts(os.path.join(cfg.run_dir, "load.counts"),
                                             cfg.worker_slot)
        gevent.spawn(self._watch_registration)
        self.hub_lag.start()
        self.metrics.start_flushing()
        if cfg.log_stats:
            gevent.spawn(self.metrics.log_periodically, cfg.log_stats_interval)
        # PERF: a full collection walked the ~40k objects of the tokenizer, templates and app
        # (9 ms holding the GIL: a stall of every hub); frozen, they are never walked again.
        gc.collect()
        gc.freeze()
        gc.set_threshold(*cfg.gc_threshold)  # see config.GC_THRESHOLD_DEFAULT
        log.info("worker %d: slot %d, tokenizer backend %s, %d request threads, offload %s",
                 self.pid, cfg.worker_slot, self.tokenizer.backend, cfg.request_threads,
                 "on" if cfg.offload else "off")

    def _start_bus(self) -> None:
        """The worker bus, when other workers share the deployment: they abort requests named
        to any worker (``resources/abort_requests.py``)."""
        cfg = self.config
        if cfg.worker_count < 2 or not cfg.run_dir:
            return
        self.bus = WorkerBus(cfg.run_dir, cfg.worker_slot, cfg.worker_count)
        self.bus.on("abort", self.client.abort_external)
        self.bus.on("flush_metrics", lambda _: self.metrics.flush_now(FLUSH_WAIT))
        self.bus.start()

    def _load_output_parsers(self):
        """The configured tool-call and reasoning parsers (checked against the vocabulary, which
        is only built when a parser is configured); a bad set-up stops the server."""
        from text.output_parsers import OutputParsers, ParserSetupError, load_output_parsers

        cfg = self.config
        if not (cfg.enable_auto_tool_choice or cfg.tool_call_parser or cfg.tool_parser_plugin
                or cfg.reasoning_parser):
            return OutputParsers()
        try:
            return load_output_parsers(
                enable_auto_tool_choice=cfg.enable_auto_tool_choice,
                tool_call_parser=cfg.tool_call_parser,
                tool_parser_plugin=cfg.tool_parser_plugin,
                reasoning_parser=cfg.reasoning_parser, vocab=self.tokenizer.hf.get_vocab(True))
        except ParserSetupError as exc:  # vLLM refuses to start the same way
            log.error("cannot start: %s", exc)
            halt_server()

    def wait_for_engines(self, heartbeat: Callable[[], None]) -> None:
        """Before the worker accepts connections: wait (bounded by ``accept_wait``) for the
        engines to register, so a fresh or restarted worker does not take requests it can only
        answer with 503 while its siblings are serving. ``heartbeat`` keeps gunicorn's master
        from taking the wait for a hung worker."""
        deadline = time.monotonic() + self.config.accept_wait
        while (left := deadline - time.monotonic()) > 0:
            if self.client.wait_ready(min(left, 1.0)):
                break
            heartbeat()
        # Then for the start-up work (``--lora-modules``): vLLM serves only once it is done.
        while self._startup_work and (left := deadline - time.monotonic()) > 0:
            gevent.joinall(self._startup_work, timeout=min(left, 1.0))
            self._startup_work = [g for g in self._startup_work if not g.dead]
            heartbeat()

    def _make_client(self) -> EngineClient:
        cfg = self.config
        # Launched by vllm serve, engine.relay plays the engines toward this slot's sockets (the
        # engines themselves only know output socket 0); standalone, the engines connect here.
        client_index = 0 if cfg.relayed else cfg.worker_slot
        inputs = (cfg.worker_address("in", cfg.worker_slot)[0], None)
        outputs = (cfg.worker_address("out", cfg.worker_slot)[0], None)
        return EngineClient(
            input_address=inputs[0], output_address=outputs[0],
            input_fd=inputs[1], output_fd=outputs[1],
            client_index=client_index, engine_start=cfg.engine_start,
            worker_slot=cfg.worker_slot, worker_count=cfg.worker_count,
            engine_count=cfg.engine_count,
            coordinator_address=cfg.coordinator_address,
            io_threads=cfg.zmq_threads, max_model_len_cap=cfg.max_model_len,
            registration_dir=cfg.run_dir, on_dead=self._on_engine_dead,
            on_ready=self._on_engines_ready, observer=self.metrics,
            stall_timeout=cfg.engine_stall_timeout, admission=self._admission(),
            on_rejected=self.metrics.record_admission_rejection)

    def _admission(self) -> Admission | None:
        """The queue limits, with the counts shared between the deployment's workers."""
        cfg = self.config
        if cfg.max_num_queued_reqs is None and cfg.max_num_queued_tokens is None:
            return None
        shared = (SharedCounts(os.path.join(cfg.run_dir, "admission.counts"), cfg.worker_slot)
                  if cfg.run_dir and cfg.worker_count > 1 else None)
        return Admission(cfg.max_num_queued_reqs, cfg.max_num_queued_tokens, shared)

    def _on_engines_ready(self) -> None:
        """HTTP hub: every engine registered (before any request can be served)."""
        try:
            self.metrics.start(dict(self.client.registrations), self.client.max_model_len)
        except Exception:  # metrics must never keep the worker from serving
            log.exception("could not set up the vLLM metric families")
        for hook in self.engines_ready_hooks:
            work = hook()
            if isinstance(work, gevent.Greenlet):
                self._startup_work.append(work)

    def _watch_registration(self) -> None:
        """HTTP hub: halt the server when the engines do not register in time (as vLLM does)."""
        timeout = self.config.engine_ready_timeout
        if self.client.wait_ready(timeout):
            return
        log.error("the engines did not register within %g s; raise VLLM_ENGINE_READY_TIMEOUT_S "
                  "(or GREENFRONT_ENGINE_READY_TIMEOUT) if they need longer to start", timeout)
        halt_server()

    def _on_engine_dead(self, reason: str) -> None:
        """HTTP hub, after every in-flight request was failed: vLLM's frontends stop serving
        when their engine dies, unless VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1."""
        if self.config.exit_on_engine_death:
            log.error("stopping: the engine core died (%s); VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1 "
                      "keeps the server up", reason)
            # The engine client failed every request in flight: their answers go out first.
            gevent.spawn(self.halt, None)

    def halt(self, error: Exception | None) -> None:
        """HTTP hub: stop the whole server (non-zero exit), after answering what is in flight
        with ``error`` (None: the engine client already failed it): a client never sees its
        connection closed without an answer (docs/parity.md §8)."""
        if self.before_halt is not None:
            try:
                self.before_halt(error)
            except Exception:
                log.exception("answering the requests in flight before halting")
        halt_server()

    def stop(self) -> None:
        """Non-blocking shutdown: engine thread and pool are told to end, not waited for."""
        self.readiness.set_draining()
        self.hub_lag.stop()
        self.metrics.stop()
        if self.bus is not None:
            self.bus.stop()
        if self.client is not None:
            self.client.stop()
        shutdown_pool()

    def flush_metrics(self) -> None:
        """HTTP hub, before a scrape: every worker writes what it gathered so far, so the
        scrape shows the deployment's figures up to now, not as of each one's last periodic
        flush (``docs/parity.md`` §6)."""
        self.metrics.flush_now(FLUSH_WAIT)
        if self.bus is not None:
            self.bus.ask("flush_metrics", None, 2 * FLUSH_WAIT)

    # -- /load (HTTP hub) --------------------------------------------------------------------
    def track_load(self, delta: int) -> None:
        """A tracked request came (+1) or left (-1) (``middleware.load_tracking``)."""
        self.tracked_requests += delta
        if self._load_counts is not None:
            self._load_counts.publish(self.tracked_requests, 0)

    def server_load(self) -> int:
        """``/load``: with load tracking the deployment's tracked requests (every worker's, as
        the admission limits count them), else this worker's engine requests in flight."""
        if not self.config.enable_server_load_tracking:
            return self.client.in_flight if self.client else 0
        others = self._load_counts.others()[0] if self._load_counts is not None else 0
        return self.tracked_requests + others

    # -- serving ----------------------------------------------------------------------------
    def serving_context(self) -> ServingContext:
        """The conversion context; raises 503 until the engines have registered."""
        ctx = self._context
        if ctx is not None and self.client.healthy:
            return ctx
        self.ensure_started()
        self.client.check_available()
        if self._context is None:
            self._context = self._build_context()
        return self._context

    def _build_context(self) -> ServingContext:
        cfg = self.config
        return ServingContext(
            served_model_names=cfg.model_names,
            model_path=cfg.model_dir,
            tokenizer=self.tokenizer,
            chat_template=self.chat_template,
            max_model_len=self.client.max_model_len,
            generation_defaults=(self.model.generation_defaults()
                                 if cfg.use_generation_config else {}),
            generation_eos_ids=self.model.generation_eos_token_ids(),
            system_fingerprint=cfg.system_fingerprint,
            special_tokens=self.model.special_tokens,
            response_role=cfg.response_role,
            trust_request_chat_template=cfg.trust_request_chat_template,
            max_logprobs=cfg.max_logprobs,
            stream_interval=cfg.stream_interval,
            enable_force_include_usage=cfg.enable_force_include_usage,
            enable_prompt_tokens_details=cfg.enable_prompt_tokens_details,
            return_tokens_as_token_ids=cfg.return_tokens_as_token_ids,
            exclude_tools_when_tool_choice_none=cfg.exclude_tools_when_tool_choice_none,
            enable_per_request_metrics=cfg.enable_per_request_metrics,
            max_stop_strings=cfg.max_stop_strings,
            max_n=cfg.max_n,
            max_completion_prompts=cfg.max_completion_prompts,
            default_chat_template_kwargs=server_template_kwargs(cfg),
            structured_outputs_backend=cfg.structured_outputs_backend,
            tokens_only=cfg.tokens_only,
            adapters=adapter_lookup(cfg),
            output_parsers=self.output_parsers,
        )


def server_template_kwargs(cfg) -> dict:
    """``--default-chat-template-kwargs`` plus the ``cohere_format`` vLLM always adds to them
    (its ``--cohere-format`` default, ``cmd4``, unless the kwargs name one)."""
    kwargs = dict(cfg.default_chat_template_kwargs or {})
    kwargs.setdefault("cohere_format", "cmd4")
    return kwargs


#: gunicorn halts the whole server (master included, non-zero exit) when a worker exits with
#: its WORKER_BOOT_ERROR code; vllm serve then tears the engines down.
WORKER_BOOT_ERROR = 3


def halt_server() -> None:
    logging.shutdown()
    os._exit(WORKER_BOOT_ERROR)
