"""Per-worker state: the model's text side, the engine client, and the serving context.

Built once per worker process after fork (``WorkerState.start`` from gunicorn's
``post_worker_init`` hook, or lazily on the first request). The ``ServingContext`` that request
conversion needs is made when every engine has registered, because ``max_model_len`` comes from
the engines.

Runs on: the HTTP hub (start/stop); ``serving_context`` is read from pool threads.
"""
from __future__ import annotations

import logging
import os


from config import Config
from engine.client import EngineClient
from runtime.request_pool import get_pool, shutdown_pool

log = logging.getLogger("greenfront.state")


class WorkerState:
    """Everything a worker process serves with. Resources hold a reference from build time."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.pid: int | None = None
        self.model = None
        self.tokenizer = None
        self.chat_template = None
        self.client: EngineClient | None = None
        self._context = None
        self.started_at: float = 0.0

    # -- lifecycle --------------------------------------------------------------------------
    def ensure_started(self) -> None:
        if self.pid != os.getpid():
            self.start()

    def start(self) -> None:
        """Load the tokenizer and start the engine client (idempotent per process)."""
        if self.pid == os.getpid():
            return
        from text.chat_template import ChatTemplate
        from text.model_dir import ModelFiles
        from text.tokenizer import Tokenizer

        cfg = self.config
        self.pid = os.getpid()
        import time
        self.started_at = time.time()
        self.model = ModelFiles.load(cfg.model)
        self.tokenizer = Tokenizer.from_files(self.model, backend=cfg.tokenizer_backend)
        template = self.model.chat_template
        self.chat_template = (ChatTemplate(template, self.model.special_tokens)
                              if template else None)
        get_pool(cfg.request_threads, cfg.switch_interval)
        self.client = EngineClient(
            input_address=cfg.ipc_address("in", cfg.worker_slot),
            output_address=cfg.ipc_address("out", cfg.worker_slot),
            client_index=cfg.worker_slot, engine_count=cfg.engine_count,
            io_threads=cfg.zmq_threads, max_model_len_cap=cfg.max_model_len,
            registration_dir=cfg.run_dir)
        self.client.start()
        log.info("worker %d: slot %d, tokenizer backend %s, %d request threads, offload %s",
                 self.pid, cfg.worker_slot, self.tokenizer.backend, cfg.request_threads,
                 "on" if cfg.offload else "off")

    def stop(self) -> None:
        """Non-blocking shutdown: engine thread and pool are told to end, not waited for."""
        if self.client is not None:
            self.client.stop()
        shutdown_pool()

    # -- serving ----------------------------------------------------------------------------
    def serving_context(self):
        """The conversion context; raises 503 until the engines have registered."""
        ctx = self._context
        if ctx is not None and self.client.healthy:
            return ctx
        self.ensure_started()
        self.client.check_available()
        if self._context is None:
            self._context = self._build_context()
        return self._context

    def _build_context(self):
        from resources.common.context import ServingContext

        cfg = self.config
        return ServingContext(
            served_model_names=cfg.model_names,
            model_path=cfg.model,
            tokenizer=self.tokenizer,
            chat_template=self.chat_template,
            max_model_len=self.client.max_model_len,
            generation_defaults=self.model.generation_defaults(),
            generation_eos_ids=self.model.generation_eos_token_ids(),
            system_fingerprint=cfg.system_fingerprint,
            special_tokens=self.model.special_tokens,
        )
