"""POST /pooling: the pooler's raw output per input, for the model's own pooling task
(docs/pooling.md §2). ``task`` may only name that task; ``dimensions`` is refused, as vLLM 0.32
refuses it here.

Runs on: a request-pool thread (``prepare``), the HTTP hub (``render``).
"""
from __future__ import annotations

from typing import Any

from base.errors import InvalidRequest
from base.jsonio import dumps
from resources.pooled import types
from resources.pooled.convert import build, parse_body, pooling_params
from resources.pooled.output import PooledState, check_encoding, encode
from resources.pooled.resource import PooledResource
from runtime.served_tasks import served_tasks
from runtime.serving_context import ServingContext
from streaming.prepared import PooledRequest

COMPLETION = types.table(types.BASIC, types.COMPLETION, types.ENCODING, types.EMBED, types.TASK)
CHAT = types.table(types.BASIC, types.CHAT, types.ENCODING, types.EMBED, types.TASK)


class PoolingResource(PooledResource):
    """Pool the model's hidden states (vLLM's /pooling)."""

    schemas = {"PoolingCompletionRequest": COMPLETION, "PoolingChatRequest": CHAT}

    def prepare(self, body: Any, ctx: ServingContext, model_config: dict[str, Any],
                header_request_id: str | None) -> PooledRequest:
        f, is_chat = parse_body(body, COMPLETION, CHAT)
        check_encoding(f)
        if f["dimensions"] is not None:
            raise InvalidRequest("dimensions is currently not supported", param="dimensions")
        served = served_tasks(self._state.client.supported_tasks, model_config)
        own = served.pooling_task
        task = f["task"] or own
        if task != own and task != "plugin":
            tasks = served.tasks
            if task not in tasks:
                # vLLM 0.32 lists them in a set's order, random per process; sorted here.
                raise InvalidRequest(f"Unsupported task: {task!r} Supported tasks: "
                                     f"{sorted(tasks)}", param="task")
            raise InvalidRequest(f"Try switching the model's pooling_task via "
                                 f"--pooler-config.task {task}.", param="task")
        if task not in ("embed", "classify"):
            raise InvalidRequest(f"greenfront does not implement the {task!r} pooling task.",
                                 param="task")
        params = pooling_params(task, f["use_activation"])
        return build(f, ctx, is_chat, "pooling", header_request_id, params)

    def render(self, prepared: PooledRequest, out: PooledState, created: int) -> bytes:
        f = prepared.fields
        return dumps({"id": prepared.request_id, "object": "list", "created": created,
                      "model": prepared.model,
                      "data": [{"index": i, "object": "pooling", "data": encode(v, f)}
                               for i, v in enumerate(out.vectors)],
                      "usage": out.usage()})
