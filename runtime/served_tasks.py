"""Which routes a deployment serves, from what its engines can do (``engine.tasks``).

vLLM 0.32's Python frontend registers its routes after asking the engines for their tasks
(docs/pooling.md §1): the generation routes only for a ``generate`` model, the pooling routes only
for a pooling model, the scoring routes only where scoring makes sense. greenfront registers every
route in Falcon at import (before any engine is known) and ``middleware.task_routes`` answers
vLLM's 404 for the ones this decides are not served.

Runs on: any thread (immutable values and pure functions).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from engine import tasks as engine_tasks

#: Served only when the engines generate (vLLM's generate and scale-out routers).
GENERATION_ROUTES = frozenset({"/v1/completions", "/v1/chat/completions",
                               "/inference/v1/generate", "/v1/responses", "/v1/messages",
                               "/v1/messages/count_tokens", "/inference/v1/abort_requests",
                               "/abort_requests"})
#: Generation routes with a path parameter (``/v1/responses/{id}``, its ``/cancel``).
GENERATION_PREFIXES = ("/v1/responses/",)
#: The scoring API's routes (vLLM's ``scoring/api_router.py``).
SCORING_ROUTES = frozenset({"/score", "/v1/score", "/rerank", "/v1/rerank", "/v2/rerank"})
#: The embed task's routes: OpenAI's embeddings and Cohere's v2 embed.
EMBED_ROUTES = frozenset({"/v1/embeddings", "/v2/embed"})
#: Every route of a pooling model.
POOLING_ROUTES = SCORING_ROUTES | EMBED_ROUTES | {"/pooling", "/classify"}
#: The routes whose presence depends on the engines' tasks.
TASK_ROUTES = GENERATION_ROUTES | POOLING_ROUTES


@dataclass(frozen=True)
class ServedTasks:
    """What the engines do and which of ``TASK_ROUTES`` that serves."""

    tasks: tuple[str, ...]
    routes: frozenset[str]

    @property
    def pooling_task(self) -> str | None:
        """The task a pooling model serves (None: the model generates)."""
        return engine_tasks.pooling_task(self.tasks)

    @property
    def score_type(self) -> str | None:
        """How /score and /rerank score: "bi-encoder" (embeddings, cosine similarity) or
        "cross-encoder" (the pair classified), or None where they are not served."""
        if "/score" not in self.routes:
            return None
        return "cross-encoder" if self.pooling_task == "classify" else "bi-encoder"

    def refuses(self, path: str) -> bool:
        """Whether ``path`` is a task route this deployment does not serve."""
        if path.startswith(GENERATION_PREFIXES):
            return not engine_tasks.generates(self.tasks)
        return path in TASK_ROUTES and path not in self.routes


def is_task_route(path: str) -> bool:
    """Whether serving ``path`` depends on the engines' tasks."""
    return path in TASK_ROUTES or path.startswith(GENERATION_PREFIXES)


def served_tasks(tasks: Iterable[str], model_config: dict[str, Any]) -> ServedTasks:
    """The routes vLLM 0.32 registers for ``tasks`` (``model_config``: the model's
    config.json, whose label count decides scoring for a classifier)."""
    tasks = tuple(tasks)
    routes: set[str] = set()
    if engine_tasks.generates(tasks):
        routes |= GENERATION_ROUTES
    pooling = engine_tasks.pooling_task(tasks)
    if pooling is not None:
        routes.add("/pooling")
    if "classify" in tasks:
        routes.add("/classify")
    if "embed" in tasks:
        routes |= EMBED_ROUTES
    # Scoring: an embedding model (cosine similarity), or a classifier of exactly one label.
    if pooling in ("embed", "token_embed") or (
            pooling == "classify" and num_labels(model_config) == 1):
        routes |= SCORING_ROUTES
    return ServedTasks(tasks, frozenset(routes))


def num_labels(config: dict[str, Any]) -> int:
    """A classifier's label count as vLLM derives it from config.json: a 2-way softmax over
    two tokens (an LLM reranker) is one score; otherwise the token list, ``num_labels``, the
    ``id2label`` map, or transformers' default of 2."""
    tokens = config.get("classifier_from_token")
    if tokens and config.get("method") == "from_2_way_softmax":
        return 1
    if tokens:
        return len(tokens)
    if isinstance(config.get("num_labels"), int):
        return config["num_labels"]
    if isinstance(config.get("id2label"), dict):
        return len(config["id2label"])
    return 2
