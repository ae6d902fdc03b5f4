"""Failures under ``vllm serve``, greenfront (two workers) beside vLLM's own Python frontend on
real vLLM 0.32 CPU engines (``docs/parity.md`` §8): an engine that dies under requests in flight
(each gets vLLM's error answer, never a closed connection), and a ``--lora-modules`` adapter
that cannot load (the start fails, as vLLM's does).
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
import requests

from tests.support.processes import cmdline
from tests.interop.peers import (descendants, requires_peers, serve_with_greenfront,
                                 serve_with_python_frontend)

pytestmark = requires_peers


def _answers_when_the_engine_dies(stack) -> dict:
    """Two whole and two streamed completions in flight, the engine core killed: what each
    client got (status, the whole body or the stream's last two events)."""
    out: dict = {}
    streaming = [threading.Event(), threading.Event()]

    def run(key: str, stream: bool) -> None:
        try:
            r = requests.post(stack.url + "/v1/completions", timeout=90, stream=stream, json={
                "model": "tiny", "prompt": "Hello", "max_tokens": 1800, "ignore_eos": True,
                "stream": stream})
            chunks = []
            for chunk in r.iter_content(None):
                chunks.append(chunk)
                if stream:
                    streaming[int(key[-1])].set()
            body = b"".join(chunks)
            if stream:
                body = b"\n\n".join(body.split(b"\n\n")[-3:-1])
            out[key] = (r.status_code, body)
        except requests.RequestException as exc:  # a closed connection: the bug this is about
            out[key] = ("no answer", repr(exc))
    threads = [threading.Thread(target=run, args=(f"{kind}{i}", kind == "stream"))
               for kind in ("whole", "stream") for i in range(2)]
    for t in threads:
        t.start()
    # The streams' first tokens say the engine runs the batch (the four were sent together); a
    # fixed wait could outlast 1,800 tokens on a fast machine.
    for event in streaming:
        assert event.wait(60), "the streams did not start"
    time.sleep(1)  # the whole ones too (sent at the same moment)
    engines = [p for p in descendants(stack.proc.pid) if "EngineCore" in cmdline(p)]
    assert engines, "no EngineCore process found"
    for pid in engines:
        os.kill(pid, signal.SIGKILL)
    for t in threads:
        t.join(100)
    return out


def test_requests_in_flight_when_the_engine_dies_get_vllms_answer(tmp_path):
    answers = {}
    for name, start in (("python", serve_with_python_frontend),
                        ("greenfront", lambda log: serve_with_greenfront(log, workers=2))):
        stack = start(str(tmp_path / f"{name}.log"))
        try:
            answers[name] = _answers_when_the_engine_dies(stack.wait_healthy())
            stack.proc.wait(timeout=90)  # vllm serve stops (vLLM's exits 0, greenfront's 1)
        finally:
            stack.kill()
    theirs, ours = answers["python"], answers["greenfront"]
    assert ours == theirs, json.dumps({k: [str(v) for v in a.values()] for k, a in answers.items()})
    assert theirs["whole0"][0] == 500


def test_a_lora_module_that_cannot_load_stops_the_start(tmp_path):
    args = ["--enable-lora", "--max-lora-rank", "8",
            "--lora-modules", "sql=/nonexistent/adapters/sql"]
    for name, start in (("python", lambda log: serve_with_python_frontend(log, args)),
                        ("greenfront", lambda log: serve_with_greenfront(log, args,
                                                                         workers=2))):
        stack = start(str(tmp_path / f"{name}.log"))
        try:
            code = stack.proc.wait(timeout=300)
            assert code != 0, (name, stack.log())
            if name == "greenfront":
                assert "--lora-modules sql=/nonexistent/adapters/sql did not load" in stack.log()
        finally:
            stack.kill()
