"""Refuses the routes the engines' tasks do not serve, before anything reaches an engine.

A generation request sent to a pooling engine kills that engine core (docs/pooling.md §1), and a
pooling request to a generate engine has nothing to run it. vLLM 0.32's Python frontend never
registers those routes, so they answer FastAPI's bare 404 ``{"detail":"Not Found"}``; this layer
answers the same from ``runtime.served_tasks``. Until the engines have told their tasks, a task
route answers the 503 of an engine that has not registered: passed on, it could reach the engine
after the tasks arrive without having been checked against them.

Runs on: the HTTP hub (reads the engine client's ``supported_tasks``, a whole-value store).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from base.errors import ApiError, EngineUnavailable
from middleware.errors import wsgi_error
from runtime.served_tasks import ServedTasks, is_task_route, served_tasks

#: FastAPI's answer for a route that is not registered.
NOT_FOUND_BODY = b'{"detail":"Not Found"}'


class TaskRoutes:
    """Wraps the WSGI app; ``state`` is the worker's (``client``, ``model``)."""

    def __init__(self, app: Callable, state: Any) -> None:
        self._app = app
        self._state = state
        self._served: ServedTasks | None = None

    def served(self) -> ServedTasks | None:
        """HTTP hub: the served routes once the engines told their tasks, else None."""
        self._state.ensure_started()
        client = self._state.client
        if client is None or not client.ready:
            return None
        served = self._served
        if served is None or served.tasks != client.supported_tasks:
            model = self._state.model
            served = served_tasks(client.supported_tasks, model.config if model else {})
            self._served = served
        return served

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if not is_task_route(path):
            return self._app(environ, start_response)
        served = self.served()
        if served is None:
            return self._not_ready(start_response)
        if served.refuses(path):
            start_response("404 Not Found", [("Content-Type", "application/json"),
                                             ("Content-Length", str(len(NOT_FOUND_BODY)))])
            return [NOT_FOUND_BODY]
        return self._app(environ, start_response)

    def _not_ready(self, start_response: Callable) -> Iterable[bytes]:
        error: ApiError = EngineUnavailable("The engine core has not registered yet; retry "
                                            "shortly.")
        client = self._state.client
        if client is not None:
            try:
                client.check_available()  # dead or closed say so
            except ApiError as exc:
                error = exc
        return wsgi_error(start_response, error)
