"""vLLM 0.32's Python frontend beside greenfront on the same simulated engine outputs: the
parity gaps of issue 25 that do not need a real engine (``docs/parity.md``).

vLLM's frontend serves from greenfront's simulator (``--output-mode echo``, the same pace), and
greenfront with two workers from its own: every answer but ids and timestamps must match.
``stream_options`` in every combination, ``POST /inference/v1/abort_requests`` (its bad bodies,
and a request of each endpoint aborted while it runs, on whichever worker), ``/tokenizer_info``.
"""
from __future__ import annotations

import json
import threading
import time

import pytest
import requests

from tests.integration.harness import GreenfrontServer
from tests.interop.peers import MODEL, requires_peers, vllm_frontend_on_simulator
from tests.support.normalize import normalized

pytestmark = requires_peers

ITL_MS = 20
FLAGS = ["--enable-scale-out", "--enable-tokenizer-info-endpoint"]


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    logs = str(tmp_path_factory.mktemp("parity-vllm"))
    ours = GreenfrontServer(MODEL, workers=2, sim_args=f"--output-mode echo --itl-ms {ITL_MS}",
                            env={"GREENFRONT_ENABLE_TOKENIZER_INFO_ENDPOINT": "1",
                                 "GREENFRONT_MAX_MODEL_LEN": "2048"})
    with vllm_frontend_on_simulator(logs, FLAGS, sim_args=[
            "--output-mode", "echo", "--itl-ms", str(ITL_MS)]) as theirs:
        ours.start(timeout=120)
        try:
            yield ours, theirs
        finally:
            ours.stop()


def _norm(body: bytes) -> bytes:
    return normalized(body, ("id", "request_id", "created", "system_fingerprint"))


STREAM_OPTIONS = [None, {}, {"include_usage": False}, {"include_usage": None},
                  {"include_usage": False, "continuous_usage_stats": True},
                  {"include_usage": False, "continuous_usage_stats": False},
                  {"continuous_usage_stats": True}, {"include_usage": True},
                  {"include_usage": True, "continuous_usage_stats": True},
                  {"include_usage": True, "continuous_usage_stats": False}]
ENDPOINTS = [("/v1/completions", {"prompt": "Hello there"}),
             ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Say hi"}]})]


@pytest.mark.parametrize("path,base", ENDPOINTS, ids=["completions", "chat"])
def test_stream_options_every_combination_as_vllm(stacks, path, base):
    ours, theirs = stacks
    for options in STREAM_OPTIONS:
        body = dict(base, model="tiny", max_tokens=4, stream=True, temperature=0)
        if options is not None:
            body["stream_options"] = options
        a = requests.post(ours.url + path, json=body, timeout=60)
        b = requests.post(theirs.url + path, json=body, timeout=60)
        assert a.status_code == b.status_code == 200, (options, a.text, b.text)
        assert _norm(a.content) == _norm(b.content), options
        usage_chunks = b.content.count(b'"usage":{')
        assert usage_chunks == (0 if not (options or {}).get("include_usage") else
                                1 + 4 * bool(options.get("continuous_usage_stats"))
                                + (path.endswith("chat/completions")
                                   and bool(options.get("continuous_usage_stats"))))


ABORT_BODIES = [b"xx", b"{}", b'{"request_ids": []}', b'{"request_ids": "nobody"}',
                b'{"request_ids": ["nobody", "nor-me"]}']


@pytest.mark.parametrize("body", ABORT_BODIES)
def test_abort_requests_answers_as_vllm(stacks, body):
    ours, theirs = stacks
    answers = [requests.post(s.url + "/inference/v1/abort_requests", data=body, timeout=30,
                             headers={"Content-Type": "application/json"}) for s in stacks]
    assert answers[0].status_code == answers[1].status_code, [a.text for a in answers]
    assert answers[0].content == answers[1].content


def test_abort_requests_refuses_what_vllm_fails_on(stacks):
    ours, _ = stacks
    for body in (b"[1]", b'{"request_ids": [1]}', b'{"request_ids": 5}'):
        r = requests.post(ours.url + "/inference/v1/abort_requests", data=body, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["type"] == "Bad Request", r.text


RUNNING = [
    ("/inference/v1/generate", {"token_ids": [1, 2, 3], "request_id": "{rid}",
                                "sampling_params": {"max_tokens": 400, "ignore_eos": True}},
     "generate-tokens-{rid}"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 400, "ignore_eos": True,
                         "request_id": "{rid}"}, "cmpl-{rid}-0"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 2,
                              "max_tokens": 400, "ignore_eos": True, "request_id": "{rid}"},
     "chatcmpl-{rid}"),
]


def _aborted(stack, path: str, body: dict, external: str, stream: bool) -> tuple[int, bytes]:
    """Run ``body``, abort it by ``external`` once it runs; the whole answer."""
    out: dict = {}

    def run() -> None:
        r = requests.post(stack.url + path, json=dict(body, stream=stream), timeout=60)
        out["answer"] = (r.status_code, r.content)
    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)  # 50 of 400 tokens: running in the engine, far from done
    r = requests.post(stack.url + "/inference/v1/abort_requests",
                      json={"request_ids": [external]}, timeout=30)
    assert r.status_code == 200 and r.content == b""
    thread.join(30)
    assert "answer" in out, "the aborted request did not end"
    return out["answer"]


def _shape(path: str, status: int, content: bytes, stream: bool) -> tuple:
    """What an aborted answer must share with vLLM's: status, finish reasons, last chunk's
    fields (its token count depends on when the abort landed)."""
    if not stream:
        body = json.loads(content)
        return status, sorted(body), [c["finish_reason"] for c in body["choices"]]
    events = [line[6:] for line in content.decode().split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    finishes = sorted(c["finish_reason"] for ch in chunks for c in ch["choices"]
                      if c.get("finish_reason"))
    return status, sorted(chunks[-1]), finishes


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("path,body,external", RUNNING, ids=["generate", "completions", "chat"])
def test_a_running_request_aborted_by_id_ends_as_vllms(stacks, path, body, external, stream):
    ours, theirs = stacks
    shapes = []
    for n, stack in enumerate(stacks):
        # Several at once on greenfront: with two workers, some run on the worker that does
        # not receive the abort call.
        runs = 1 if stack is theirs else 3
        results = []
        threads = []
        for i in range(runs):
            rid = f"abort-{path.rsplit('/', 1)[1]}-{stream}-{n}-{i}"
            filled = json.loads(json.dumps(body).replace("{rid}", rid))
            threads.append(threading.Thread(target=lambda f=filled, r=rid: results.append(
                _aborted(stack, path, f, external.format(rid=r), stream))))
            threads[-1].start()
        for thread in threads:
            thread.join(60)
        assert len(results) == runs
        for status, content in results:
            shapes.append(_shape(path, status, content, stream))
    assert all(shape == shapes[0] for shape in shapes), shapes
    assert "abort" in shapes[0][2]


def test_tokenizer_info_as_vllm(stacks):
    ours, theirs = stacks
    a = requests.get(ours.url + "/tokenizer_info", timeout=30)
    b = requests.get(theirs.url + "/tokenizer_info", timeout=30)
    assert a.status_code == b.status_code == 200
    mine, vllms = a.json(), b.json()
    # vLLM names its own tokenizer wrapper class there; greenfront the config's (docs/parity.md).
    assert mine.pop("tokenizer_class") == "PreTrainedTokenizerFast"
    vllms.pop("tokenizer_class")
    assert mine == vllms


def test_version_names_vllms_release_as_the_rust_frontend_does(stacks):
    ours, theirs = stacks
    mine = requests.get(ours.url + "/version", timeout=30).json()
    vllms = requests.get(theirs.url + "/version", timeout=30).json()
    assert mine["version"] == vllms["version"] == mine["rust_frontend_version"]


FORWARDED = [5000, 6000, 7000, 8000, 1]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_forwarded_prompt_ids_are_the_prompt_as_in_vllm(stacks, stream):
    """A P/D decode stage: the prefill stage's ids in ``kv_transfer_params`` are the prompt
    (the echo simulator answers them back), the messages are not rendered."""
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Say hi"}],
            "max_tokens": 6, "temperature": 0, "return_token_ids": True, "stream": stream,
            "kv_transfer_params": {"prompt_token_ids": FORWARDED}}
    answers = [requests.post(s.url + "/v1/chat/completions", json=body, timeout=60)
               for s in stacks]
    assert answers[0].status_code == answers[1].status_code == 200, [a.text for a in answers]
    assert _norm(answers[0].content) == _norm(answers[1].content)
    assert b'"prompt_token_ids":[5000,6000,7000,8000,1]' in answers[1].content


@pytest.mark.parametrize("ids", [[], [-1], "x", [1.5], [True], [10 ** 7], None],
                         ids=["empty", "negative", "string", "float", "bool", "oov", "null"])
def test_bad_forwarded_prompt_ids_answer_as_vllm(stacks, ids):
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Say hi"}],
            "max_tokens": 3, "temperature": 0, "kv_transfer_params": {"prompt_token_ids": ids}}
    answers = [requests.post(s.url + "/v1/chat/completions", json=body, timeout=60)
               for s in stacks]
    assert answers[0].status_code == answers[1].status_code, [a.text for a in answers]
    assert _norm(answers[0].content) == _norm(answers[1].content)


def test_echo_renders_the_messages_despite_forwarded_ids_as_vllm(stacks):
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Say hi"}],
            "max_tokens": 3, "temperature": 0, "echo": True, "return_token_ids": True,
            "kv_transfer_params": {"prompt_token_ids": FORWARDED}}
    answers = [requests.post(s.url + "/v1/chat/completions", json=body, timeout=60)
               for s in stacks]
    assert answers[0].status_code == answers[1].status_code == 200, [a.text for a in answers]
    assert _norm(answers[0].content) == _norm(answers[1].content)
