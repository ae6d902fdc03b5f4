"""``vllm serve`` with greenfront as its frontend, against vLLM's own Python frontend.

Both serve the same tiny model on real vLLM 0.32 CPU engines; greedy requests must give the same
bytes (ids, timestamps and ``system_fingerprint`` aside). Then: a client disconnect aborts the
request in the real engine, and SIGTERM to ``vllm serve`` ends everything with exit code 0.
"""
from __future__ import annotations

import re
import time

import openai
import pytest
import requests

from tests.support.processes import alive, cmdline
from tests.interop.peers import (WORKER_COUNTS, descendants, requires_peers,
                                 serve_with_greenfront, serve_with_python_frontend)
from tests.support.normalize import first_equal, normalized
from tests.support.raw_http import open_stream

pytestmark = requires_peers

def _normalized(body: bytes) -> bytes:
    return normalized(body, ("id", "created", "system_fingerprint"))


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    logs = tmp_path_factory.mktemp("vllm-serve-python")
    stack = serve_with_python_frontend(str(logs / "python.log"), ["--disable-log-stats"])
    try:
        yield stack.wait_healthy()
    finally:
        stack.kill()


@pytest.fixture(scope="module", params=WORKER_COUNTS, ids=lambda n: f"{n}-workers")
def stacks(request, tmp_path_factory, theirs):
    """greenfront under vllm serve with 1, then 2 workers (every test here runs with each),
    beside vLLM's own Python frontend."""
    logs = tmp_path_factory.mktemp("vllm-serve")
    # Stats stay on for greenfront's stack: its /metrics then shows the engine's running count.
    ours = serve_with_greenfront(str(logs / "greenfront.log"), workers=request.param)
    try:
        yield ours.wait_healthy(), theirs
    finally:
        ours.kill()


REQUESTS = [
    ("/v1/completions", {"model": "tiny", "prompt": "The capital of France is", "max_tokens": 8,
                         "temperature": 0}),
    ("/v1/completions", {"model": "tiny", "prompt": ["Hello", "The capital of France is"],
                         "max_tokens": 3, "temperature": 0, "return_token_ids": True}),
    ("/v1/completions", {"model": "tiny", "prompt": "The capital of France is", "max_tokens": 8,
                         "temperature": 0, "stop": ["bern"], "logprobs": 2}),
    ("/v1/chat/completions", {"model": "tiny", "max_tokens": 8, "temperature": 0,
                              "messages": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "Say hi"}]}),
    ("/v1/chat/completions", {"model": "tiny", "max_tokens": 6, "temperature": 0,
                              "logprobs": True, "top_logprobs": 2,
                              "messages": [{"role": "user", "content": "Zwölf Boxkämpfer"}]}),
]


@pytest.mark.parametrize("path,body", REQUESTS, ids=[f"{p}-{i}" for i, (p, _) in
                                                    enumerate(REQUESTS)])
def test_greedy_bodies_match_vllms_python_frontend(stacks, path, body):
    ours, theirs = stacks
    a = requests.post(ours.url + path, json=body, timeout=120)
    b = requests.post(theirs.url + path, json=body, timeout=120)
    assert a.status_code == b.status_code == 200, (a.text, b.text)
    assert _normalized(a.content) == _normalized(b.content)


@pytest.mark.parametrize("path,body", REQUESTS[:1] + REQUESTS[3:4], ids=["completion", "chat"])
def test_greedy_streams_match_vllms_python_frontend(stacks, path, body):
    ours, theirs = stacks
    body = dict(body, stream=True, stream_options={"include_usage": True})
    a, b = first_equal(
        lambda: _normalized(requests.post(ours.url + path, json=body, timeout=120).content),
        lambda: _normalized(requests.post(theirs.url + path, json=body, timeout=120).content))
    assert a == b
    assert a.endswith(b"data: [DONE]\n\n")


def test_openai_client_sees_the_same_text(stacks):
    ours, theirs = stacks
    texts = []
    for stack in stacks:
        client = openai.OpenAI(base_url=stack.url + "/v1", api_key="x", max_retries=0)
        chunks = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=8,
            temperature=0, stream=True)
        texts.append("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
    assert texts[0] == texts[1] == "եյিযipleÜberർinomború Literatura"


def _running(stack) -> float:
    text = requests.get(stack.url + "/metrics", timeout=10).text
    match = re.search(r'^vllm:num_requests_running\{engine="0",model_name="tiny"\} (\S+)$', text,
                      re.M)
    return float(match.group(1)) if match else -1.0


def test_client_disconnect_aborts_the_request_in_the_real_engine(stacks):
    ours, _ = stacks
    sock = open_stream(ours.url, {"model": "tiny", "prompt": "Hello", "max_tokens": 1800,
                                  "ignore_eos": True, "stream": True}, events=2)
    deadline = time.time() + 30
    while _running(ours) != 1.0:  # the engine reports the request in its batch
        assert time.time() < deadline, requests.get(ours.url + "/metrics", timeout=10).text
        time.sleep(0.2)
    sock.close()
    # 1,800 tokens would keep the engine busy for minutes; the ABORT empties its batch at once.
    deadline = time.time() + 30
    while _running(ours) != 0.0:
        assert time.time() < deadline, "the engine still runs the request after the disconnect"
        time.sleep(0.2)
    assert requests.get(ours.url + "/load", timeout=10).json() == {"server_load": 0}


def test_sigterm_to_vllm_serve_ends_everything_cleanly(stacks):
    ours, _ = stacks
    tree = descendants(ours.proc.pid)
    assert any("greenfront" in cmdline(p) or "gunicorn" in cmdline(p)
               for p in tree if _alive(p))
    started = time.time()
    code = ours.terminate(timeout=60)
    assert code == 0, ours.log()
    assert time.time() - started < 30
    # vLLM's multiprocessing resource tracker may outlive the main process by a moment.
    deadline = time.time() + 15
    while [p for p in tree if _alive(p)] and time.time() < deadline:
        time.sleep(0.2)
    left = {p: cmdline(p)[:200] for p in tree if _alive(p)}
    assert not left, left


_alive = alive
