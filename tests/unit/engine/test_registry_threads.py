"""The engine client's request registry under concurrent submits and aborts.

Real parts: an ``EngineClient`` with its engine-I/O thread and ZMQ sockets in this process, two
simulator processes (DP ranks 0 and 1) as its engines. Several native threads submit and abort
at once (as request-pool threads do) while this thread's hub aborts too (as the HTTP hub does);
a switch interval of a microsecond makes lost updates likely wherever two threads write the
same counter. Afterwards the registry's counts and streams must be exact, and the engines must
have been told every abort (their own running count returns to 0). (CPython 3.11 checks for a
thread switch only at calls and backward jumps, so the old shared ``+=`` rarely lost an update
there; the registry's single owner keeps the counts exact on any interpreter, free-threaded
builds included.)
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import gevent
import pytest

from engine.client import EngineClient
from engine.protocol import EngineCoreRequest, SamplingParams
from engine.stream import Waker

from tests.support.waiting import wait_in_hub as _wait
from tests.support.sim_driver import ROOT

THREADS = 4
PER_THREAD = 150
LONG = 100_000  # tokens: these never finish during the test


def _request(rid: str, max_tokens: int) -> EngineCoreRequest:
    return EngineCoreRequest(
        request_id=rid, prompt_token_ids=[1, 501, 502], mm_features=None,
        sampling_params=SamplingParams(max_tokens=max_tokens, ignore_eos=True),
        pooling_params=None, arrival_time=time.time(), lora_request=None, cache_salt=None,
        data_parallel_rank=None, client_index=0, priority=0, external_req_id=rid)


def _on_engine_thread(client: EngineClient, fn):
    """Run ``fn`` on the client's engine-I/O thread (the registry's owner) and return its
    result, while this thread's hub keeps running."""
    done = threading.Event()
    box = []
    client._call_engine(lambda: (box.append(fn()), done.set()))
    while not done.is_set():
        gevent.sleep(0.005)
    return box[0]


@pytest.fixture
def client(tmp_path):
    inputs, outputs = f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"
    stats: dict[int, object] = {}

    class LatestStats:  # the engine client's observer: each engine's last scheduler stats
        def on_step(self, outputs, batch):
            if outputs.scheduler_stats is not None:
                stats[outputs.engine_index] = outputs.scheduler_stats
    client = EngineClient(input_address=inputs, output_address=outputs, client_index=0,
                          engine_count=2, observer=LatestStats())
    client.start()
    sims = [subprocess.Popen(
        [sys.executable, "-m", "engine.sim", "--input", inputs, "--output", outputs,
         "--rank", str(rank), "--data-parallel-size", "2", "--max-model-len", "200000",
         "--max-num-seqs", "10000", "--ttft-ms", "5", "--itl-ms", "20",
         "--output-mode", "echo"], cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for rank in (0, 1)]
    try:
        assert _wait(lambda: client.ready), "the simulators did not register"
        client.engine_stats = stats
        yield client
    finally:
        for sim in sims:
            sim.terminate()
        for sim in sims:
            sim.wait(10)
        client.stop()


def _submit_and_abort_from_threads(client: EngineClient) -> tuple[dict, dict]:
    """``THREADS`` native threads each submit ``PER_THREAD`` requests at once: a third short
    (they finish), a third kept, a third aborted at once. Returns the (kept, short) streams."""
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    kept: dict[str, object] = {}
    short: dict[str, object] = {}
    errors: list[BaseException] = []

    def hammer(t: int) -> None:
        try:
            for i in range(PER_THREAD):
                rid = f"t{t}-{i}"
                kind = i % 3
                stream = client.submit(_request(rid, 2 if kind == 0 else LONG), Waker())
                if kind == 0:
                    short[rid] = stream
                elif kind == 1:
                    kept[rid] = stream
                else:
                    client.abort([rid])  # a pool thread giving up at once
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(t,)) for t in range(THREADS)]
    try:
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads):
            gevent.sleep(0.001)  # the hub delivers outputs meanwhile
    finally:
        sys.setswitchinterval(old_interval)
    assert not errors, errors
    return kept, short


def test_counts_and_streams_are_exact_under_concurrent_submit_and_abort(client):
    kept, short = _submit_and_abort_from_threads(client)
    expected = THREADS * PER_THREAD // 3
    assert len(kept) == expected and len(short) == expected

    # The short requests finish on their own; the kept ones stay, each exactly once. The
    # engine thread runs handed-in work in order: once a call posted now has run, every
    # submit and abort above has too.
    _on_engine_thread(client, lambda: None)
    assert _wait(lambda: all(s.finished and s.error is None for s in short.values()))
    assert client.in_flight == expected

    def snapshot():
        registry = client._registry
        streams = dict(registry._streams)
        return streams, {rank: registry.outstanding(rank) for rank in client.ranks}
    streams, outstanding = _on_engine_thread(client, snapshot)
    assert set(streams) == set(kept)
    assert all(streams[rid] is kept[rid] for rid in kept)
    for rank in client.ranks:
        assert outstanding[rank] == sum(1 for s in kept.values() if s.engine_rank == rank)
    assert sum(outstanding.values()) == expected
    assert all(s.engine_rank in client.ranks for s in kept.values())
    assert not any(s.finished for s in kept.values())

    # The HTTP hub aborts the rest (as a disconnect does): nothing is left, here or in the engines.
    for stream in kept.values():
        stream.abort()
    assert _wait(lambda: client.in_flight == 0)
    _, outstanding = _on_engine_thread(client, snapshot)
    assert outstanding == {0: 0, 1: 0}
    stats = client.engine_stats
    assert _wait(lambda: all(rank in stats and stats[rank].num_running_reqs == 0
                             and stats[rank].num_waiting_reqs == 0 for rank in (0, 1)))
