"""Builds greenfront's WSGI application: ``gunicorn -c gunicorn.conf.py app:api``.

Order: config → worker state → Falcon app (error handlers, auth) → routes → the offload driver
around it → the HTTP metrics around that. Routes are listed here, in one place, grouped as vLLM's
frontends group them.

Runs on: import time in each gunicorn worker (after fork and gevent's patching).
"""
from __future__ import annotations

import logging
from typing import Callable

import falcon
import gevent

from base.config import Config
from middleware import errors as error_handlers
from middleware.auth import AuthMiddleware
from middleware.drain import DrainMiddleware
from middleware.http_headers import Cors, RequestId
from middleware.http_metrics import HttpMetrics
from middleware.load_tracking import LoadTracking
from middleware.offload import OffloadMiddleware
from middleware.probes import ProbeFastPath, empty_200
from middleware.root_path import RootPath
from middleware.task_routes import TaskRoutes
from middleware.tokens_only import TokensOnlyMiddleware
from resources.abort_requests import AbortRequestsResource, LegacyAbortRequestsResource
from resources.admin import register_admin_routes
from resources.admin.lora import load_static_modules
from resources.chat.resource import ChatCompletionsResource
from resources.classify.resource import ClassifyResource
from resources.cohere_embed.resource import CohereEmbedResource
from resources.completions.resource import CompletionsResource
from resources.embeddings.resource import EmbeddingsResource
from resources.generate.resource import GenerateResource
from resources.health import (HealthResource, KvEventSourcesResource, LoadResource,
                              MetricsResource, ReadyResource, VersionResource)
from resources.messages.resource import CountTokensResource, MessagesResource
from resources.pooling.resource import PoolingResource
from resources.score.resource import RerankResource, ScoreResource
from resources.models import ModelsResource
from resources.responses.resource import ResponsesResource
from resources.responses.stored import CancelResponseResource, StoredResponseResource
from resources.openapi import OpenApiResource
from resources.tokenize.resource import DetokenizeResource, TokenizeResource
from resources.tokenizer_info import TokenizerInfoResource
from runtime import shutdown
from runtime.request_pool import get_pool
from runtime.lora_registry import lora_registry
from runtime.state import WorkerState
from runtime.worker import Listener, current_serving
from rpc.server import handler_for as grpc_handler


def build_api(config: Config, state: WorkerState | None = None,
              drain: shutdown.Drain | None = None) -> ProbeFastPath | RootPath:
    """The WSGI callable: the Falcon app wrapped by the offload driver, the HTTP metrics, CORS,
    request ids, the drain and the probe fast path. A greenfront worker passes the state and drain it made
    (``runtime.worker``); built bare (tests), they are made here."""
    state = state or WorkerState(config)
    drain = drain or shutdown.Drain.for_worker(config, state)
    return _wrap(build_falcon_app(config, state), config, state, drain)


def build_falcon_app(config: Config, state: WorkerState) -> falcon.App:
    """The Falcon app: error handlers, auth and every route."""
    middleware: list = [AuthMiddleware(config.api_keys)]
    if config.tokens_only:  # after the key check, as vLLM checks keys first
        middleware.append(TokensOnlyMiddleware())
    app = falcon.App(middleware=middleware)
    error_handlers.install(app)

    # Health and metadata: answered in the HTTP hub, never queued behind request work.
    app.add_route("/health", HealthResource(state))
    app.add_route("/ready", ReadyResource(state))
    app.add_route("/version", VersionResource(state))
    app.add_route("/load", LoadResource(state))
    app.add_route("/kv_event_sources", KvEventSourcesResource(state))
    app.add_route("/metrics", MetricsResource(state))
    app.add_route("/v1/models", ModelsResource(state))
    app.add_route("/openapi.json", OpenApiResource(app, state, root_path=config.root_path))
    # OpenAI API and vLLM's tokenizer routes: offloaded to the request pool.
    app.add_route("/v1/completions", CompletionsResource(state))
    app.add_route("/v1/chat/completions", ChatCompletionsResource(state))
    app.add_route("/v1/responses", ResponsesResource(state))
    app.add_route("/v1/responses/{response_id}", StoredResponseResource(config))
    app.add_route("/v1/responses/{response_id}/cancel", CancelResponseResource(config))
    app.add_route("/v1/messages", MessagesResource(state))
    app.add_route("/v1/messages/count_tokens", CountTokensResource(state))
    app.add_route("/tokenize", TokenizeResource(state))
    app.add_route("/detokenize", DetokenizeResource(state))
    app.add_route("/inference/v1/generate", GenerateResource(state))
    app.add_route("/inference/v1/abort_requests", AbortRequestsResource(state))
    if config.tokens_only:  # the unauthenticated legacy path (docs/parity.md §9)
        app.add_route("/abort_requests", LegacyAbortRequestsResource(state))
    if config.enable_tokenizer_info_endpoint:
        app.add_route("/tokenizer_info", TokenizerInfoResource(state))
    # Pooling models (docs/pooling.md): served only for the engines' tasks (middleware.task_routes).
    app.add_route("/v1/embeddings", EmbeddingsResource(state))
    app.add_route("/pooling", PoolingResource(state))
    app.add_route("/classify", ClassifyResource(state))
    app.add_route("/v2/embed", CohereEmbedResource(state))
    for path in ("/score", "/v1/score"):
        app.add_route(path, ScoreResource(state))
    for path in ("/rerank", "/v1/rerank", "/v2/rerank"):
        app.add_route(path, RerankResource(state))
    # Dev-mode and LoRA routes (utility calls to the engines), each behind its vLLM switch.
    register_admin_routes(app, state, config)
    if config.lora_modules:
        registry = lora_registry(config)
        state.engines_ready_hooks.append(
            lambda: gevent.spawn(load_static_modules, state, registry))
    return app


def _wrap(app: falcon.App, config: Config, state: WorkerState,
          drain: shutdown.Drain) -> ProbeFastPath | RootPath:
    """The WSGI layers around the Falcon app, innermost first."""
    offload = OffloadMiddleware(
        app,
        pool=lambda: get_pool(config),
        enabled=config.offload,
        max_body_bytes=config.max_body_bytes,
        client_stall_timeout=config.client_stall_timeout,
        before=state.ensure_started,
    )
    # Routes the engines' tasks do not serve: refused in the hub, before any pool hop.
    offload = TaskRoutes(offload, state)
    # Outermost: a request's HTTP metrics cover all of it, a stream until its last byte.
    api = HttpMetrics(offload, state.metrics, lambda path: _route_template(app, path))
    if config.enable_server_load_tracking:
        api = LoadTracking(api, state)
    wsgi = DrainMiddleware(_header_layers(api, config), drain)
    # A healthy /health, a ready /ready: answered here, through the same header layers.
    wsgi = ProbeFastPath(wsgi, _header_layers(empty_200, config), state, drain)
    # Outermost, so that every layer (the drain's probe paths too) sees the path without it.
    return RootPath(wsgi, config.root_path) if config.root_path else wsgi


def _header_layers(app: Callable, config: Config) -> Callable:
    """As vLLM stacks them: request ids outside, then (auth, inside Falcon) CORS."""
    wsgi: Callable = Cors(app, list(config.allowed_origins), list(config.allowed_methods),
                          list(config.allowed_headers), config.allow_credentials)
    if config.enable_request_id_headers:
        wsgi = RequestId(wsgi)
    return wsgi


def _route_template(app: falcon.App, path: str) -> str | None:
    """The route a path matches (vLLM's ``handler`` label), or None."""
    found = app._router.find(path)  # Falcon's documented router interface (CompiledRouter)
    return found[3] if found else None


logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(process)d] [%(name)s] %(message)s")
_serving = current_serving()
api = (build_api(_serving.config, _serving.state, _serving.drain) if _serving
       else build_api(Config.from_env()))
if _serving is not None and _serving.config.grpc_listen_fd is not None:
    # gRPC (docs/grpc.md): served by the worker beside HTTP, on the master's listening socket.
    _serving.listeners.append(Listener(_serving.config.grpc_listen_fd,
                                       grpc_handler(_serving.state, _serving.drain,
                                                    _serving.config)))
