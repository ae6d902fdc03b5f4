"""The Responses store shared by every worker: ``previous_response_id`` chains whose turns land
on different gunicorn workers (SQLite in the run directory), the same across two deployments
sharing a real Redis server, ``retrieve`` and cancel through the official ``openai`` client,
eviction by size and age, and a restart that keeps SQLite-stored responses."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import httpx2 as httpx
import openai
import pytest

from engine.sim.script import scripted
from tests.integration.harness import GreenfrontServer, deployment, deployments
from tests.support.processes import free_port, reap
from tests.support.waiting import wait_for
from text.tokenizer import Tokenizer

TOOLS = [{"type": "function", "name": "get_weather", "description": "Current weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
STORE_ENV = {"GREENFRONT_ENABLE_RESPONSES_STORE": "1", "GREENFRONT_LOG_REQUESTS": "1",
             "GREENFRONT_ENABLE_AUTO_TOOL_CHOICE": "1", "GREENFRONT_TOOL_CALL_PARSER": "hermes"}
SIM = "--itl-ms 1 --ttft-ms 2"


@pytest.fixture(scope="module")
def tok(marker_model_dir):
    return Tokenizer.load(marker_model_dir, backend="hf")


def client(server):
    """A client opening a new connection per request, so requests spread over the workers."""
    http = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0,
                         http_client=http)


def serving_pid(server, response_id: str) -> int:
    """The worker that ran a response (from its ``--enable-log-requests`` line)."""
    pattern = re.compile(r"\[(\d+)\] \[greenfront\.requests\] Received request "
                         + re.escape(response_id) + "_0")
    with open(server.log_path, encoding="utf-8", errors="replace") as f:
        found = pattern.search(f.read())
    assert found, f"no request line for {response_id}"
    return int(found.group(1))


def turn(c, tok, text, previous=None, call_id="call_1", **kwargs):
    kwargs.setdefault("input", [{"type": "function_call_output", "call_id": call_id,
                                 "output": "sunny"}] if previous else "Weather in Paris?")
    return c.responses.create(model="tiny", tools=TOOLS, previous_response_id=previous,
                              extra_body={"vllm_xargs": scripted(tok, text)}, **kwargs)


def chain_across(tok, clients, servers, max_turns=30):
    """Turns chained by ``previous_response_id`` (each answer a tool call, each input its
    result) until one turn ran on another worker than its predecessor; every turn's prompt
    holds the whole history."""
    previous = turn(clients[0], tok, CALL)
    pids = [(0, serving_pid(servers[0], previous.id))]
    for i in range(1, max_turns):
        k = i % len(clients)
        r = turn(clients[k], tok, CALL, previous=previous.id, call_id=previous.output[-1].call_id)
        assert r.previous_response_id == previous.id
        # the history replayed: the earlier prompt, its call and the new tool output
        assert r.usage.input_tokens > previous.usage.input_tokens + previous.usage.output_tokens
        pids.append((k, serving_pid(servers[k], r.id)))
        previous = r
        if pids[-1] != pids[-2]:
            return pids
    raise AssertionError(f"every turn ran on the same worker: {pids}")


def test_chain_across_workers_sqlite(marker_model_dir, tok):
    with deployment(marker_model_dir, workers=2, env=STORE_ENV, sim_args=SIM) as srv:
        c = client(srv)
        chain_across(tok, [c], [srv])
        first = turn(c, tok, "Sunny.", input="hi")
        for _ in range(6):  # retrieve from whichever worker answers
            got = c.responses.retrieve(first.id)
            assert got.id == first.id and got.output_text == "Sunny."
        assert os.path.exists(os.path.join(srv.run_dir, "responses.sqlite3"))
        with pytest.raises(openai.NotFoundError) as err:
            c.responses.retrieve("resp_unknown")
        assert err.value.body["type"] == "invalid_request_error"
        assert err.value.body["message"] == "Response with id 'resp_unknown' not found."
        with pytest.raises(openai.BadRequestError) as err:
            c.responses.cancel(first.id)
        assert err.value.body["message"] == "Cannot cancel a synchronous response."
        assert httpx.get(f"{srv.url}/v1/responses/x/cancel").status_code == 405
        assert httpx.get(f"{srv.url}/v1/responses/x").status_code == 404
        unstored = turn(c, tok, "Sunny.", input="hi", store=False)
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(unstored.id)
        with pytest.raises(openai.NotFoundError):
            turn(c, tok, "Sunny.", previous=unstored.id)
        streamed = list(turn(c, tok, "Sunny.", input="hi", stream=True))[-1].response
        assert c.responses.retrieve(streamed.id).output_text == "Sunny."


def test_eviction_and_restart(marker_model_dir, tok, tmp_path):
    # A run dir the user names is kept on exit (only greenfront's own "greenfront-…" temp dirs
    # are removed), and the store with it.
    env = {**STORE_ENV, "GREENFRONT_RUN_DIR": str(tmp_path),
           "GREENFRONT_RESPONSES_STORE_MAX_ENTRIES": "3"}
    with GreenfrontServer(marker_model_dir, env=env, sim_args=SIM) as srv:
        c = client(srv)
        ids = [turn(c, tok, "Sunny.", input=f"turn {i}").id for i in range(5)]
        for rid in ids[:2]:
            with pytest.raises(openai.NotFoundError):
                c.responses.retrieve(rid)
        assert [c.responses.retrieve(rid).id for rid in ids[2:]] == ids[2:]
    with GreenfrontServer(marker_model_dir, env=env, sim_args=SIM) as srv:
        c = client(srv)
        assert [c.responses.retrieve(rid).id for rid in ids[2:]] == ids[2:]
        r = turn(c, tok, CALL, previous=ids[-1])
        assert r.previous_response_id == ids[-1]
    env["GREENFRONT_RESPONSES_STORE_MAX_AGE"] = "1"
    with deployment(marker_model_dir, env=env, sim_args=SIM) as srv:  # the last: stopped later
        c = client(srv)
        rid = turn(c, tok, "Sunny.", input="hi").id
        assert c.responses.retrieve(rid).id == rid

        def gone() -> bool:
            try:
                c.responses.retrieve(rid)
            except openai.NotFoundError:
                return True
            return False
        assert wait_for(gone, timeout=10)


@pytest.fixture
def redis_url():
    if shutil.which("redis-server") is None:  # .ci/run installs it; `make test` elsewhere too
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        import redis
        assert wait_for(lambda: _pings(redis, url), timeout=10), "redis-server did not start"
        yield url
    finally:
        reap(proc, grace=5)


def _pings(redis, url) -> bool:
    try:
        return redis.Redis.from_url(url).ping()
    except redis.ConnectionError:
        return False


def test_two_deployments_share_redis(marker_model_dir, tok, redis_url):
    env = {**STORE_ENV, "GREENFRONT_RESPONSES_STORE_URL": redis_url,
           "GREENFRONT_RESPONSES_STORE_MAX_ENTRIES": "4"}
    spec = (marker_model_dir, {"workers": 2, "env": env, "sim_args": SIM})
    with deployments(spec, spec) as (a, b):
        ca, cb = client(a), client(b)
        pids = chain_across(tok, [ca, cb], [a, b], max_turns=4)
        assert {k for k, _ in pids} == {0, 1}  # turns ran on both deployments
        assert not os.path.exists(os.path.join(a.run_dir, "responses.sqlite3"))
        rid = turn(ca, tok, "Sunny.", input="hi").id
        assert cb.responses.retrieve(rid).output_text == "Sunny."
        later = [turn(cb, tok, "Sunny.", input=f"turn {i}").id for i in range(4)]
        with pytest.raises(openai.NotFoundError):
            ca.responses.retrieve(rid)  # evicted: the oldest beyond 4 entries
        assert [ca.responses.retrieve(x).id for x in later] == later
