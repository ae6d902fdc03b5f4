"""vLLM 0.33 engines (docs/vllm-versions.md), on simulators in 0.33 mode: ERROR outputs answered
by their ``error.code``, /pause as ``pause_generation`` (new requests then a retryable 503),
``/kv_event_sources``, no DP wake-up to a 0.33 coordinator; 0.33 request fields refused.
"""
from __future__ import annotations

import json
import re

import msgspec
import pytest
import requests
import zmq

from tests.integration.harness import GreenfrontServer, deployment
from tests.integration.launch_harness import LaunchedFrontend

KEY = "v033-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
SIM = "--vllm-version 0.33.0 --output-mode echo --itl-ms 2 --verbose"


@pytest.fixture(scope="module")
def srv(model_dir):
    env = {"VLLM_SERVER_DEV_MODE": "1", "GREENFRONT_ENGINE_COUNT": "2",
           "GREENFRONT_API_KEY": KEY}
    with deployment(model_dir, env=env,
                          sim_args=SIM + " --kv-events-endpoint tcp://*:5557") as server:
        yield server


def _complete(srv: GreenfrontServer, stream: bool = False, **xargs) -> requests.Response:
    body = {"prompt": "Hello world", "max_tokens": 4, "stream": stream}
    if xargs:
        body["vllm_xargs"] = xargs
    return requests.post(srv.url + "/v1/completions", json=body, headers=AUTH, timeout=30)


@pytest.mark.parametrize("code,status,error_type,message", [
    ("validation_error", 400, "BadRequestError", "simulated request failure (validation_error)"),
    ("engine_paused", 503, "ServiceUnavailableError", "simulated request failure (engine_paused)"),
    ("sim_error", 500, "InternalServerError", "Internal server error"),
])
def test_error_outputs_by_code(srv, code, status, error_type, message):
    r = _complete(srv, sim_error_after=0, sim_error_code=code)
    assert r.status_code == status, r.text
    assert r.json()["error"] == {"message": message, "type": error_type, "param": None,
                                 "code": status}
    # Streamed, after the first chunk: the same error as the stream's error event.
    r = _complete(srv, stream=True, sim_error_after=1, sim_error_code=code)
    assert r.status_code == 200
    events = [json.loads(line[6:]) for line in r.text.splitlines()
              if line.startswith("data: {")]
    assert events[-1]["error"]["code"] == status and events[-1]["error"]["message"] == message


def test_pause_calls_pause_generation_and_new_requests_get_503(srv):
    r = requests.post(srv.url + "/pause?mode=abort", headers=AUTH, timeout=30)
    assert r.status_code == 200 and r.json() == {"status": "paused"}
    try:
        calls = re.findall(r"engine\.sim rank=(\d) UTILITY (pause_\w+)\(", srv.log())
        assert sorted(calls) == [("0", "pause_generation"), ("1", "pause_generation")], calls
        r = _complete(srv)
        assert r.status_code == 503
        assert r.json()["error"]["message"] == ("Generation is paused. Please retry after it "
                                                "resumes.")
    finally:
        assert requests.post(srv.url + "/resume", headers=AUTH, timeout=30).status_code == 200
    assert _complete(srv).status_code == 200


def test_kv_event_sources(srv):
    r = requests.get(srv.url + "/kv_event_sources", headers=AUTH, timeout=10)
    assert r.status_code == 200
    sources = r.json()
    assert sorted(sources) == ["0", "1"]
    assert sources["0"]["endpoint"] == "tcp://*:5557" and sources["0"]["publisher"] == "zmq"


@pytest.mark.parametrize("path,field,value", [
    ("/v1/completions", "return_weight_versions", True),
    ("/v1/chat/completions", "return_weight_versions", True),
    ("/inference/v1/generate", "output_mode", "derender"),
])
def test_033_request_fields_are_refused(srv, path, field, value):
    body = {"prompt": "hi", "messages": [{"role": "user", "content": "hi"}],
            "token_ids": [1, 2], "sampling_params": {"max_tokens": 2}, field: value}
    r = requests.post(srv.url + path, json=body, headers=AUTH, timeout=30)
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]["message"]


def test_no_wake_up_message_to_a_033_coordinator(model_dir, tmp_path):
    ctx = zmq.Context()
    xpub = ctx.socket(zmq.XPUB)
    xpub.setsockopt(zmq.XPUB_VERBOSE, 1)
    address = f"ipc://{tmp_path}/coordinator.sock"
    xpub.bind(address)
    fe = None
    try:
        fe = LaunchedFrontend(model_dir, engines=2, coordinator=address,
                              sim_args=SIM.split()).wait_healthy()
        assert xpub.poll(10000) and xpub.recv() == b"\x01"  # the frontend subscribed
        xpub.send(msgspec.msgpack.encode([None, 8, False]))  # idle engines, wave 8
        for _ in range(3):
            r = requests.post(fe.url + "/v1/completions",
                              json={"prompt": "Hi", "max_tokens": 1}, timeout=30)
            assert r.status_code == 200
        # A 0.32 deployment gets [engine, 8] here (tests/integration/test_launch.py).
        while xpub.poll(1000):
            message = xpub.recv()
            assert message == b"\x01", msgspec.msgpack.decode(message)  # only subscriptions
    finally:
        if fe is not None:
            fe.stop()
        xpub.close(linger=0)
        ctx.term()
