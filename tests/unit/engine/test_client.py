"""The engine client against a fake engine at the socket level.

Real parts: an ``EngineClient`` with its engine-I/O thread and ZMQ sockets in this process. The
engine is this test (``tests.support.fake_engine``: the real sockets and codec), so each case
decides exactly what the engine says (a registration, outputs, a utility reply,
ENGINE_CORE_DEAD) and sees exactly what the client sent.
"""
from __future__ import annotations

import time

import gevent
import pytest

from engine import protocol, shared_registrations
from engine.client import EngineClient
from engine.protocol import (EngineCoreOutput, EngineCoreOutputs, EngineCoreRequest, RequestType,
                             SamplingParams)
from engine.stream import Waker
from base.errors import EngineDead, EngineFailed, EngineUnavailable, InvalidRequest
from tests.support.fake_engine import FakeEngine
from tests.support.waiting import wait_in_hub as _wait


def _request(rid: str) -> EngineCoreRequest:
    return EngineCoreRequest(
        request_id=rid, prompt_token_ids=[1, 501, 502], mm_features=None,
        sampling_params=SamplingParams(max_tokens=4), pooling_params=None,
        arrival_time=time.time(), lora_request=None, cache_salt=None, data_parallel_rank=None,
        client_index=0, priority=0, external_req_id=rid)


@pytest.fixture
def client_and_engine(tmp_path):
    inputs, outputs = f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"
    client = EngineClient(input_address=inputs, output_address=outputs, client_index=0,
                          max_model_len_cap=2048)
    client.start()
    engine = FakeEngine(inputs, outputs)
    yield client, engine
    engine.close()
    client.stop()


def _ready(client: EngineClient, engine: FakeEngine) -> None:
    engine.register()
    assert client.wait_ready(10.0)


def test_requests_are_refused_with_503_until_the_engine_registers(client_and_engine):
    client, engine = client_and_engine
    with pytest.raises(EngineUnavailable):
        client.check_available()
    _ready(client, engine)
    client.check_available()
    assert client.healthy
    assert client.max_model_len == 2048  # the engine's 4096, capped by the setting


def test_an_added_request_streams_the_engines_outputs_to_the_end(client_and_engine):
    client, engine = client_and_engine
    _ready(client, engine)
    stream = client.submit(_request("r-1"), Waker())
    kind, added = engine.receive()
    assert kind == RequestType.ADD and added.request_id == "r-1"
    assert added.prompt_token_ids == [1, 501, 502]
    engine.send(EngineCoreOutputs(outputs=[EngineCoreOutput("r-1", [7, 8])]))
    engine.send(EngineCoreOutputs(outputs=[EngineCoreOutput("r-1", [9], finish_reason=1)]))
    seen: list[int] = []

    def read() -> bool:
        for output, _ in stream.take():
            seen.extend(output.new_token_ids)
        return stream.finished
    assert _wait(read)
    read()
    assert seen == [7, 8, 9]
    assert stream.error is None
    assert _wait(lambda: client.in_flight == 0)


def test_an_abort_reaches_the_engine(client_and_engine):
    client, engine = client_and_engine
    _ready(client, engine)
    stream = client.submit(_request("r-2"), Waker())
    engine.receive()
    stream.abort()
    kind, ids = engine.receive()
    assert kind == RequestType.ABORT and list(ids) == ["r-2"]
    assert _wait(lambda: client.in_flight == 0)


def test_a_utility_call_returns_the_engines_result(client_and_engine):
    client, engine = client_and_engine
    _ready(client, engine)

    def answer():
        kind, (client_index, call_id, method, args) = engine.receive()
        assert kind == RequestType.UTILITY and method == "is_sleeping" and client_index == 0
        engine.outputs.send_multipart(protocol.encode_utility_reply(0, call_id, True))
    answering = gevent.spawn(answer)
    assert client.utility("is_sleeping", timeout=10.0) is True
    answering.get(timeout=1)


def test_engine_death_fails_the_requests_in_flight_and_refuses_new_ones(client_and_engine):
    client, engine = client_and_engine
    _ready(client, engine)
    stream = client.submit(_request("r-3"), Waker())
    engine.receive()
    engine.outputs.send(protocol.ENGINE_CORE_DEAD)
    assert _wait(lambda: stream.finished)
    # vLLM's answer to a request in flight when its engine died: 500 EngineDeadError's message
    assert isinstance(stream.error, EngineFailed) and stream.error.status == 500
    assert stream.error.message.startswith("EngineCore encountered an issue.")
    assert not client.healthy
    with pytest.raises(EngineDead):
        client.check_available()


def test_a_rank_out_of_range_is_a_400(client_and_engine):
    client, engine = client_and_engine
    _ready(client, engine)
    with pytest.raises(InvalidRequest) as raised:
        client.submit(_request("r-4"), Waker(), rank=3)
    assert raised.value.status == 400


class _BlockingObserver:
    """Holds the engine-I/O thread in its first ``on_step`` until ``release``; then records,
    for every step message, how many requests the client had registered."""

    def __init__(self, client_ref: list) -> None:
        from gevent import monkey
        self._client = client_ref
        self.entered = monkey.get_original("threading", "Event")()
        self.release = monkey.get_original("threading", "Event")()
        self.in_flight: list[int] = []

    def on_step(self, outputs, batch) -> None:
        if outputs.utility_output is not None:
            return  # the get_supported_tasks answer before ready
        if not self.entered.is_set():
            self.entered.set()
            self.release.wait(30)  # natively: the engine-I/O thread's hub stands still
        self.in_flight.append(self._client[0].in_flight)


def test_a_new_request_reaches_the_engine_before_a_backlog_of_outputs_is_drained(tmp_path):
    """Under streaming saturation the output socket has a backlog; an ADD handed over meanwhile
    must not wait until the whole backlog is demultiplexed (TTFT)."""
    inputs, outputs = f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"
    ref: list = []
    observer = _BlockingObserver(ref)
    client = EngineClient(input_address=inputs, output_address=outputs, client_index=0,
                          max_model_len_cap=2048, observer=observer)
    ref.append(client)
    client.start()
    engine = FakeEngine(inputs, outputs)
    try:
        _ready(client, engine)
        client.submit(_request("long"), Waker())
        engine.receive()
        backlog = 40
        for _ in range(backlog + 1):
            engine.send(EngineCoreOutputs(outputs=[EngineCoreOutput("long", [7])]))
        assert _wait(observer.entered.is_set)
        # The backlog reaches the client's socket while its engine-I/O thread is held (ZMQ's own
        # I/O thread delivers it). Time only makes the case sharper: messages still on their
        # way could only let the ADD through earlier, so a slow machine cannot fail this test.
        gevent.sleep(0.5)
        client.submit(_request("new"), Waker())
        observer.release.set()
        assert _wait(lambda: len(observer.in_flight) == backlog + 1)
        assert 2 in observer.in_flight[:backlog // 2], observer.in_flight
        kind, added = engine.receive()
        assert kind == RequestType.ADD and added.request_id == "new"
    finally:
        observer.release.set()
        engine.close()
        client.stop()


def test_a_registration_read_from_the_run_dir_then_sent_live_turns_ready_once(tmp_path):
    """A worker that starts after a sibling finds the engine's registration in the run dir, and
    the engine then sends it live too: the task discovery and the ready hooks (which load
    ``--lora-modules``) run once, not once per copy."""
    inputs, outputs = f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"
    engine_rank = 0
    ready_calls = []
    client = EngineClient(input_address=inputs, output_address=outputs, client_index=0,
                          registration_dir=str(tmp_path),
                          on_ready=lambda: ready_calls.append(time.monotonic()))
    engine = FakeEngine(inputs, outputs, rank=engine_rank)
    shared_registrations.save(str(tmp_path), engine_rank, engine.registration())
    client.start()
    try:
        engine.register(tasks=None)  # live, while the discovery the file started waits
        engine.answer_supported_tasks(["generate"])
        assert client.wait_ready(10.0)
        assert not _wait(lambda: engine.requests.poll(0), 1.0), "a second discovery was sent"
        assert len(ready_calls) == 1
    finally:
        engine.close()
        client.stop()
