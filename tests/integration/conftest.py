"""Integration fixtures: one shared greenfront deployment (gunicorn + simulator) per module."""
from __future__ import annotations

import pytest

from tests.integration.harness import GreenfrontServer


@pytest.fixture(scope="session")
def server(model_dir):
    """A default deployment: 1 worker, the simulator engine, echo output for readable tests."""
    with GreenfrontServer(model_dir, sim_args="--output-mode echo --itl-ms 2 --ttft-ms 5") as srv:
        yield srv


@pytest.fixture
def make_server(model_dir):
    """Start extra deployments with their own settings; all are stopped after the test."""
    started = []

    def make(wait_healthy: bool = True, **kwargs) -> GreenfrontServer:
        srv = GreenfrontServer(model_dir, **kwargs).start(wait_healthy=wait_healthy)
        started.append(srv)
        return srv
    yield make
    for srv in started:
        srv.stop()
