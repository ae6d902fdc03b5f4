"""Integration fixtures: one shared greenfront deployment (gunicorn + simulator) per module."""
from __future__ import annotations

import pytest

from tests.integration.harness import GreenfrontServer, deployments, wait_stopped
from tests.integration.weather_script import PARSER_ENV


@pytest.fixture(scope="session", autouse=True)
def _deployments_stopped():
    """Deployments are stopped behind the tests (``GreenfrontServer.stop_later``); the session
    ends only once every one of them has exited."""
    yield
    wait_stopped()


@pytest.fixture(scope="session")
def _shared(model_dir, marker_model_dir):
    """The session's shared deployments, started at once (``deployments``): ``server``,
    ``weather_server``, ``embed_server``."""
    with deployments(
            (model_dir, {"sim_args": "--output-mode echo --itl-ms 2 --ttft-ms 5"}),
            (marker_model_dir, {"env": PARSER_ENV, "sim_args": "--itl-ms 1 --ttft-ms 2"}),
            (model_dir, {"sim_args": "--runner pooling --convert embed --itl-ms 2"})) as shared:
        yield shared


@pytest.fixture(scope="session")
def server(_shared) -> GreenfrontServer:
    """A default deployment: 1 worker, the simulator engine, echo output for readable tests."""
    return _shared[0]


@pytest.fixture(scope="session")
def weather_server(_shared) -> GreenfrontServer:
    """The tool-calling suites' deployment (chat, Responses, Messages): the marker-token model
    with ``weather_script.PARSER_ENV``; one for all three, as none of them changes its state."""
    return _shared[1]


@pytest.fixture(scope="session")
def embed_server(_shared) -> GreenfrontServer:
    """A pooling deployment: the simulator as an embedding model (``--runner pooling``, its
    default ``--convert embed``); shared by the pooling suites, none of which changes its
    state."""
    return _shared[2]


@pytest.fixture(scope="module")
def _fresh_servers(request, model_dir):
    """The deployments of the module's selected tests that ask for ``fresh_server``, each with
    its ``@pytest.mark.deployment(**GreenfrontServer arguments)``, all started before the
    module's first such test (``deployments``), by test id."""
    items = [item for item in request.session.items
             if item.module is request.module and "fresh_server" in item.fixturenames]
    specs = []
    for item in items:
        marker = item.get_closest_marker("deployment")
        assert marker is not None, f"{item.nodeid}: fresh_server needs @pytest.mark.deployment"
        specs.append((model_dir, marker.kwargs))
    with deployments(*specs) as servers:
        yield {item.nodeid: srv for item, srv in zip(items, servers)}


@pytest.fixture
def fresh_server(request, _fresh_servers) -> GreenfrontServer:
    """A deployment of this test's own (``@pytest.mark.deployment(...)``: ``make_server``'s
    arguments), started with the module's others; stopped after the test (``stop_later``)."""
    srv = _fresh_servers[request.node.nodeid]
    yield srv
    srv.stop_later()


@pytest.fixture
def make_server(model_dir):
    """Start extra deployments with their own settings; all are stopped after the test, behind
    the next ones (``stop_later``)."""
    started = []

    def make(wait_healthy: bool = True, **kwargs) -> GreenfrontServer:
        srv = GreenfrontServer(model_dir, **kwargs).start(wait_healthy=wait_healthy)
        started.append(srv)
        return srv
    yield make
    for srv in started:
        srv.stop_later()
