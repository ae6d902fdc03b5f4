"""The worker state: the serving context waits for the engines, follows their death, and
carries the settings request conversion reads.

Real parts: a ``WorkerState`` started in this process (the test model's tokenizer, the request
pool, an ``EngineClient`` with its engine-I/O thread), and a fake engine at the socket level
(``tests.support.fake_engine``) on the worker's own addresses.
"""
from __future__ import annotations

import os

import pytest

from base.config import Config
from base.errors import EngineDead, EngineUnavailable
from runtime.state import WorkerState, server_template_kwargs
from tests.support.fake_engine import FakeEngine
from tests.support.waiting import wait_in_hub

MODEL = os.environ.get("GREENFRONT_TEST_MODEL_DIR", "models/tekken-tiny")


@pytest.fixture
def state_and_engine(tmp_path):
    config = Config.from_env({
        "GREENFRONT_MODEL": MODEL, "GREENFRONT_ENGINE": "external",
        "GREENFRONT_RUN_DIR": str(tmp_path), "GREENFRONT_MAX_MODEL_LEN": "1000",
        "GREENFRONT_SERVED_MODEL_NAME": "tiny,other", "GREENFRONT_LOG_STATS": "0",
        "GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS": '{"enable_thinking": false}',
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus")})
    os.makedirs(tmp_path / "prometheus")
    state = WorkerState(config)
    state.start()
    engine = FakeEngine(config.worker_address("in", 0)[0], config.worker_address("out", 0)[0])
    yield state, engine
    engine.close()
    state.stop()


def test_the_serving_context_waits_for_the_engines(state_and_engine):
    state, engine = state_and_engine
    with pytest.raises(EngineUnavailable):
        state.serving_context()
    engine.register(max_model_len=4096)
    assert wait_in_hub(lambda: state.client.ready)
    ctx = state.serving_context()
    assert ctx.max_model_len == 1000  # the engine's length, capped by the setting
    assert ctx.served_model_names == ("tiny", "other")
    assert ctx.default_chat_template_kwargs == {"enable_thinking": False, "cohere_format": "cmd4"}
    assert ctx.tokenizer is state.tokenizer
    assert state.serving_context() is ctx  # built once


def test_after_engine_death_the_context_is_refused(state_and_engine):
    state, engine = state_and_engine
    engine.register()
    assert wait_in_hub(lambda: state.client.ready)
    state.serving_context()
    engine.outputs.send(b"ENGINE_CORE_DEAD")
    assert wait_in_hub(lambda: not state.client.healthy)
    with pytest.raises(EngineDead):
        state.serving_context()


def test_server_template_kwargs_keep_a_given_cohere_format():
    config = Config.from_env({"GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS": '{"cohere_format": "x"}'})
    assert server_template_kwargs(config) == {"cohere_format": "x"}
    assert server_template_kwargs(Config.from_env({})) == {"cohere_format": "cmd4"}
