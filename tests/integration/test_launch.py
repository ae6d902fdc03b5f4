"""``bin/greenfront frontend …`` as ``vllm serve`` starts it, with simulator engines.

The test plays the supervisor: it binds the HTTP socket (not listening) and the engine listeners,
starts the executable with the inherited fds and the engines pointed at those listeners. The
tests that matter for several workers run with ``GREENFRONT_WORKERS`` 1 and 2 (``engine.relay``
owns the engine listeners and serves the workers).
"""
from __future__ import annotations

import re
import signal
import subprocess
import time

import msgspec
import openai
import pytest
import requests
import zmq

from tests.integration.launch_harness import EXECUTABLE, LaunchedFrontend


@pytest.fixture
def launch(model_dir):
    started = []

    def make(**kwargs) -> LaunchedFrontend:
        frontend = LaunchedFrontend(model_dir, **kwargs)
        started.append(frontend)
        return frontend
    yield make
    for frontend in started:
        frontend.stop()


WORKERS = pytest.mark.parametrize("workers", ["1", "2"], ids=["1-worker", "2-workers"])


@WORKERS
def test_serves_the_openai_api_on_the_inherited_socket_and_exits_0_on_sigterm(launch, workers):
    fe = launch(sim_args=["--output-mode", "echo", "--itl-ms", "2"],
                args={"enable_log_requests": True, "api_key": ["sekrit"]},
                env={"VLLM_LOG_STATS_INTERVAL": "0.5",
                     "GREENFRONT_WORKERS": workers}).wait_healthy()
    assert requests.get(fe.url + "/v1/models", timeout=10).status_code == 401
    assert requests.get(fe.url + "/health", timeout=10).status_code == 200
    client = openai.OpenAI(base_url=fe.url + "/v1", api_key="sekrit", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["tiny"]
    out = client.completions.create(model="tiny", prompt="Hello world", max_tokens=2,
                                    temperature=0)
    assert out.choices[0].text == "Hello world"
    assert re.search(r"Received request cmpl-\S+: prompt_token_ids=3 tokens", fe.log())
    chunks = list(client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=4,
        temperature=0, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Say hi"
    # SIGTERM with a stream in flight: stop accepting, abort, exit 0 within 5 s.
    stream = client.completions.create(model="tiny", prompt="Hello", max_tokens=3000,
                                       stream=True, extra_body={"ignore_eos": True})
    next(iter(stream))
    deadline = time.time() + 10
    while "Running: 1 reqs" not in fe.log():  # the periodic stats line (disable_log_stats off)
        assert time.time() < deadline, fe.log()
        time.sleep(0.1)
    started = time.time()
    fe.proc.send_signal(signal.SIGTERM)
    assert fe.proc.wait(timeout=10) == 0
    assert time.time() - started < 5.0


def test_unknown_frontend_option_is_refused_with_one_message(model_dir):
    fe = LaunchedFrontend(model_dir, args={"tool_server": "demo",
                                           "ssl_ciphers": "HIGH",
                                           "dtype": "bfloat16", "enforce_eager": True},
                          start_engines=False)
    try:
        assert fe.proc.wait(timeout=30) == 2
        log = fe.log()
        assert ("does not implement these vllm serve frontend options: "
                "--ssl-ciphers, --tool-server") in log
        assert "dtype" not in log.split("options:")[1]  # engine options are ignored
    finally:
        fe.stop()


@WORKERS
def test_engine_registration_timeout_exits_non_zero(model_dir, workers):
    fe = LaunchedFrontend(model_dir, args={"engine_ready_timeout_secs": 1},
                          start_engines=False, env={"GREENFRONT_WORKERS": workers})
    try:
        code = fe.proc.wait(timeout=60)
        assert code != 0
        assert "did not register within 1 s" in fe.log()
    finally:
        fe.stop()


@WORKERS
def test_engine_death_fails_requests_and_exits_non_zero(launch, workers):
    fe = launch(sim_args=["--die-after", "1"], env={"GREENFRONT_WORKERS": workers}).wait_healthy()
    r = requests.post(fe.url + "/v1/completions",
                      json={"prompt": "Hello", "max_tokens": 1000, "ignore_eos": True},
                      timeout=30)
    assert r.status_code in (500, 503)
    assert fe.proc.wait(timeout=30) != 0


def test_keep_alive_on_engine_death_keeps_serving_503(launch):
    fe = launch(sim_args=["--die-after", "1"],
                env={"VLLM_KEEP_ALIVE_ON_ENGINE_DEATH": "1"}).wait_healthy()
    requests.post(fe.url + "/v1/completions",
                  json={"prompt": "Hello", "max_tokens": 1000, "ignore_eos": True}, timeout=30)
    deadline = time.time() + 15
    while requests.get(fe.url + "/health", timeout=5).status_code != 503:
        assert time.time() < deadline
        time.sleep(0.1)
    time.sleep(1.5)
    assert fe.proc.poll() is None


@WORKERS
def test_two_engines_with_a_coordinator_follow_its_counts_and_wave(launch, tmp_path, workers):
    ctx = zmq.Context()
    xpub = ctx.socket(zmq.XPUB)
    xpub.setsockopt(zmq.XPUB_VERBOSE, 1)
    address = f"ipc://{tmp_path}/coordinator.sock"
    xpub.bind(address)
    try:
        fe = launch(engines=2, coordinator=address, env={"GREENFRONT_WORKERS": workers},
                    sim_args=["--output-mode", "echo", "--itl-ms", "2"]).wait_healthy()
        for _ in range(int(workers)):  # every worker subscribes on its own XSUB
            assert xpub.poll(10000), "a worker never subscribed"
            assert xpub.recv() == b"\x01"
        # Engine 0 is swamped, engine 1 idle; wave 7 is running.
        xpub.send(msgspec.msgpack.encode([[[50, 50, 0.9], [0, 0, 0.0]], 7, True]))
        time.sleep(0.5)
        for _ in range(6):
            r = requests.post(fe.url + "/v1/completions",
                              json={"prompt": "Hello world", "max_tokens": 2}, timeout=30)
            assert r.status_code == 200
        adds = re.findall(r"rank=(\d) ADD \S+ .* wave=(\d+)", fe.log())
        assert adds and all(rank == "1" and wave == "7" for rank, wave in adds), adds
        # Idle engines (running false): the first request sends the wave notice (0.32).
        xpub.send(msgspec.msgpack.encode([None, 8, False]))
        time.sleep(0.5)
        requests.post(fe.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 1},
                      timeout=30)
        assert xpub.poll(5000)
        engine, wave = msgspec.msgpack.decode(xpub.recv())
        assert wave == 8 and engine in (b"\x00\x00", b"\x01\x00")
    finally:
        xpub.close(linger=0)
        ctx.term()


def test_bad_command_line_exits_2():
    proc = subprocess.run([EXECUTABLE, "frontend", "--listen-fd", "3"], capture_output=True,
                          timeout=30)
    assert proc.returncode == 2
