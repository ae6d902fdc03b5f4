"""One real deployment for the whole fuzz run, and the Hypothesis profiles that bound it.

The deployment is gunicorn (2 workers) + the simulator, with the dev and LoRA routes on, random
output (every token id the tokenizer has, so detokenization sees special and odd tokens) and a
short context (256) so that requests that pass validation finish in milliseconds. It is checked
drained (healthy, nothing left in the frontend or the engine) after every test module.

Profiles (``HYPOTHESIS_PROFILE``): ``fuzz`` (default, what ``make fuzz`` and CI run: a few
thousand cases in a few minutes on 2 cores), ``quick`` (a smoke run), ``long`` (10x ``fuzz``).
"""
from __future__ import annotations

import os

import pytest
import requests
from hypothesis import HealthCheck, settings

from tests.fuzz.checks import TALLY, check_drained
from tests.integration.harness import GreenfrontServer

_COMMON = dict(deadline=None, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
settings.register_profile("fuzz", max_examples=300, **_COMMON)
settings.register_profile("quick", max_examples=50, **_COMMON)
settings.register_profile("long", max_examples=3000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fuzz"))

SIM_ARGS = "--output-mode random --vocab-size 131072 --ttft-ms 0 --itl-ms 0.2 --max-model-len 256"


@pytest.fixture(scope="session")
def deployment(model_dir):
    env = {"VLLM_SERVER_DEV_MODE": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1",
           "GREENFRONT_REQUEST_WORKER_THREADS": "2"}
    # A generous start-up bound: on a loaded 2-core machine loading the tokenizer takes long.
    srv = GreenfrontServer(model_dir, workers=2, sim_args=SIM_ARGS, env=env).start(timeout=240)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def server(deployment):
    """The deployment, checked healthy and drained after the module's cases."""
    yield deployment
    check_drained(deployment.url)


@pytest.fixture(scope="module")
def http():
    with requests.Session() as session:
        yield session


def pytest_terminal_summary(terminalreporter):
    """How the answers were spread (a suite whose cases all fail parsing would test little)."""
    if not TALLY:
        return
    terminalreporter.section("fuzz answers (route, status, error type or body)")
    for (route, status, kind), count in sorted(TALLY.items()):
        terminalreporter.write_line(f"{count:6d}  {route:40s} {status} {kind}")
    terminalreporter.write_line(f"{sum(TALLY.values()):6d}  in total")
