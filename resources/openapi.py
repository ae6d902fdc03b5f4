"""GET /openapi.json: greenfront's API as an OpenAPI 3.1 document, generated from the app itself.

The paths and methods are the routes the Falcon app serves (``falcon.inspect``), so a gated
route (dev mode, runtime LoRA) appears exactly when it is served. Request bodies come from the
field tables the endpoints validate with (each resource's ``request_schemas()``, built by
``resources.common.fields.fields_schema`` from the validators' schemas): the document cannot
drift from what the parser accepts; ``resources.openapi_checks`` adds the bounds the semantic
checks enforce (``n >= 1``, a non-empty prompt, …). Types are the strict JSON ones, as vLLM's pydantic models
publish theirs; unknown body keys are allowed because the parser ignores them.

Runs on: the HTTP hub (built once, on the first request, after every route is registered).
"""
from __future__ import annotations

from typing import Any, Callable

import falcon
import falcon.inspect

from base import jsonio
from resources.health import VERSION
from resources.openapi_checks import with_checks
from runtime.served_tasks import served_tasks

OPENAPI_VERSION = "3.1.0"
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "ErrorResponse",
    "properties": {"error": {
        "type": "object",
        "properties": {"message": {"type": "string"},
                       "type": {"type": "string"},
                       "param": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                       "code": {"type": "integer"}},
        "required": ["message", "type", "param", "code"],
    }},
    "required": ["error"],
}
_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}
#: What a GET route answers, by the resource's ``media_type`` attribute (default JSON).
_JSON = "application/json"


def build_document(app: falcon.App, title: str = "greenfront", root_path: str = "",
                   refuses: Callable[[str], bool] = lambda path: False) -> dict[str, Any]:
    """The OpenAPI document of every route ``app`` serves, but those ``refuses`` names (the
    task routes the engines' tasks do not serve, ``runtime.served_tasks``)."""
    schemas: dict[str, Any] = {"ErrorResponse": ERROR_SCHEMA}
    paths: dict[str, Any] = {}
    for route in falcon.inspect.inspect_routes(app):
        if refuses(route.path):
            continue
        resource = app._router.find(route.path)[0]
        operations = {}
        for method in route.methods:
            if method.internal:
                continue
            operations[method.method.lower()] = _operation(resource, method.method, schemas)
        if operations:
            paths[route.path] = operations
    document: dict[str, Any] = {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if root_path:
        document["servers"] = [{"url": root_path}]
    return document


def _operation(resource: Any, method: str, schemas: dict[str, Any]) -> dict[str, Any]:
    doc = (type(resource).__doc__ or "").strip().splitlines()
    name = type(resource).__name__.removesuffix("Resource")
    operation: dict[str, Any] = {"operationId": f"{method.lower()}_{name}",
                                 "summary": doc[0] if doc else name}
    bodies = resource.request_schemas() if hasattr(resource, "request_schemas") else {}
    streams = False
    if bodies:
        refs = []
        for schema_name, schema in bodies.items():
            schemas[schema_name] = with_checks(schema_name, schema)
            refs.append({"$ref": f"#/components/schemas/{schema_name}"})
            streams = streams or "stream" in schema.get("properties", {})
        body_schema = refs[0] if len(refs) == 1 else {"anyOf": refs}
        operation["requestBody"] = {"required": True,
                                    "content": {_JSON: {"schema": body_schema}}}
    operation["responses"] = {"200": _success(getattr(resource, "media_type", _JSON), streams),
                              "default": {"description": "An error in OpenAI's envelope",
                                          "content": {_JSON: {"schema": _ERROR_REF}}}}
    return operation


def _success(media_type: str | None, streams: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": "Successful Response"}
    if media_type is None:
        return answer  # an empty body (/health)
    content: dict[str, Any] = {media_type: {"schema": {"type": "object"} if media_type == _JSON
                                            else {"type": "string"}}}
    if streams:  # "stream": true answers with server-sent events
        content["text/event-stream"] = {"schema": {"type": "string"}}
    answer["content"] = content
    return answer


class OpenApiResource:
    """The OpenAPI document of this server."""

    def __init__(self, app: falcon.App, state: Any, root_path: str = "") -> None:
        self._app = app
        self._state = state
        self._root_path = root_path
        self._body: bytes | None = None

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self._body is None:  # the hub is one thread: at worst built twice, same bytes
            client, model = self._state.client, self._state.model
            ready = client is not None and client.ready
            # Before the engines told their tasks every route is listed (and not kept).
            refuses = (served_tasks(client.supported_tasks, model.config if model else {}).refuses
                       if ready else (lambda path: False))
            body = jsonio.dumps(build_document(self._app, root_path=self._root_path,
                                               refuses=refuses))
            if not ready:
                resp.content_type = falcon.MEDIA_JSON
                resp.data = body
                return
            self._body = body
        resp.content_type = falcon.MEDIA_JSON
        resp.data = self._body
