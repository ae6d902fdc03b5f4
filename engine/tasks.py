"""The task names an engine core reports through its ``get_supported_tasks`` utility.

A pooling engine registers exactly as a generate engine does (docs/pooling.md §1): only this
utility, called once after every engine registered, tells a frontend what the model can do. The
names are vLLM 0.32's (``vllm/tasks.py``); ``pooling_task`` picks the one task a pooling model's
routes serve, in vLLM's priority order.

Runs on: any thread (constants and pure functions).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

log = logging.getLogger("greenfront.engine")

#: Tasks that generate tokens (vLLM's GenerationTask).
GENERATION_TASKS = ("generate", "transcription", "realtime")
#: Tasks of a pooling model (vLLM's PoolingTask), in the priority ``pooling_task`` uses.
POOLING_TASKS = ("embed&token_classify", "embed", "classify", "token_embed", "token_classify",
                 "plugin")
#: What an engine is taken to support when it cannot say (vLLM's FALLBACK_SUPPORTED_TASKS).
FALLBACK_TASKS: tuple[str, ...] = ("generate",)
#: The utility that answers the task list.
SUPPORTED_TASKS_METHOD = "get_supported_tasks"


def parse_supported_tasks(result: Any) -> tuple[str, ...]:
    """The engine's answer as a tuple of task names; anything else is a ``ValueError``."""
    if not isinstance(result, (list, tuple)) or not all(isinstance(t, str) for t in result):
        raise ValueError(f"get_supported_tasks answered {result!r}, not a list of task names")
    return tuple(result)


def discover(ask: Callable[[], Any]) -> tuple[str, ...]:
    """The engines' tasks: ``ask()`` calls the utility and returns its result. An engine that
    cannot answer is taken to generate, as vLLM's frontend does."""
    try:
        found = parse_supported_tasks(ask())
    except Exception as exc:  # an old or foreign engine: keep serving what every engine does
        log.warning("the engine did not tell its supported tasks (%s); serving %s", exc,
                    FALLBACK_TASKS)
        return FALLBACK_TASKS
    log.info("supported tasks: %s", ", ".join(found))
    return found


def generates(tasks: Iterable[str]) -> bool:
    """Whether the generation routes (completions, chat, generate) are served."""
    return "generate" in tasks


def pooling_task(tasks: Iterable[str]) -> str | None:
    """The pooling task a model serves (vLLM's ``ModelConfig.get_pooling_task`` without an
    explicit ``--pooler-config`` task), or None for a model that does not pool."""
    present = set(tasks)
    return next((task for task in POOLING_TASKS if task in present), None)
