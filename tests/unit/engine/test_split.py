"""engine.protocol.split: one output message cut per worker slot by bytes, decoded as before."""
from __future__ import annotations

import glob
import os

import msgspec
import pytest

from engine.protocol import codec
from engine.protocol.outputs import (EngineCoreOutput, EngineCoreOutputs, SchedulerStats,
                                     UtilityOutput)
from engine.protocol.split import slot_of_request, split_outputs

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "compat", "engine-core-fixtures")


def _output(rid: str, token: int, finish: int | None = None) -> EngineCoreOutput:
    return EngineCoreOutput(request_id=rid, new_token_ids=[token], finish_reason=finish)


def _payload(outputs: EngineCoreOutputs) -> bytes:
    frames = codec.encode_outputs(outputs)
    assert len(frames) == 1
    return frames[0]


def _rid(i: int, slot: int) -> str:
    return f"r{i}-{(i * 7919) & 0xFFFFFF:06x}{slot:02x}"


def test_slot_is_the_ids_last_two_hex_digits():
    assert slot_of_request("cmpl-abc-12345601", 2) == 1
    assert slot_of_request("0_cmpl-abc-abcdef02", 3) == 2
    assert slot_of_request("cmpl-abc-abcdef05", 3) == 0  # not a slot of 3 workers
    assert slot_of_request("not-hex-suffix!", 2) == 0


def test_outputs_of_each_worker_arrive_unchanged_and_in_order():
    outputs = [_output(_rid(i, i % 3), i, 0 if i == 3 else None) for i in range(20)]
    batch = EngineCoreOutputs(engine_index=1, outputs=outputs, timestamp=12.5,
                              finished_requests=[_rid(3, 0)], weight_version="v2")
    parts = split_outputs(_payload(batch), 3)
    assert sorted(parts) == [0, 1, 2]
    for slot, part in parts.items():
        got = codec.decode_outputs([part])
        assert got.outputs == [o for i, o in enumerate(outputs) if i % 3 == slot]
        assert (got.engine_index, got.timestamp, got.weight_version) == (1, 12.5, "v2")
        assert got.finished_requests == [_rid(3, 0)]
        assert got.scheduler_stats is None and got.utility_output is None


def test_a_message_for_one_worker_is_passed_as_is():
    batch = EngineCoreOutputs(outputs=[_output(_rid(1, 0), 1), _output(_rid(2, 0), 2)])
    assert split_outputs(_payload(batch), 2) == {0: None}


def test_stats_go_to_one_worker_and_a_utility_reply_to_its_caller():
    stats = SchedulerStats(num_running_reqs=3, num_waiting_reqs=1, kv_cache_usage=0.25)
    batch = EngineCoreOutputs(outputs=[_output(_rid(5, 1), 7)], scheduler_stats=stats)
    assert split_outputs(_payload(batch), 2) == {1: None}  # with the outputs' worker
    both = EngineCoreOutputs(outputs=[_output(_rid(5, 1), 7), _output(_rid(6, 0), 8)],
                             scheduler_stats=stats)
    parts = split_outputs(_payload(both), 2)
    assert codec.decode_outputs([parts[0]]).scheduler_stats == stats
    assert codec.decode_outputs([parts[1]]).scheduler_stats is None
    assert split_outputs(_payload(EngineCoreOutputs(scheduler_stats=stats)), 2) == {0: None}
    reply = EngineCoreOutputs(utility_output=UtilityOutput(call_id=9, result=[None, True]))
    assert split_outputs(_payload(reply), 2) == {1: None}
    assert split_outputs(_payload(reply), 4) == {1: None}


def test_many_outputs_need_a_16_bit_array_header():
    outputs = [_output(_rid(i, i % 2), i) for i in range(40)]
    parts = split_outputs(_payload(EngineCoreOutputs(outputs=outputs)), 2)
    assert [len(codec.decode_outputs([p]).outputs) for p in parts.values()] == [20, 20]


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(
    FIXTURES, "captured", "*", "*", "*_outputs.f0.bin"))))
def test_real_engine_messages_split_to_the_same_outputs(path):
    # vLLM 0.32's own output messages (single-frame ones): every output lands in exactly one
    # part, byte-identical once decoded.
    if os.path.exists(path.replace(".f0.bin", ".f1.bin")):
        pytest.skip("multi-frame messages are forwarded whole")
    with open(path, "rb") as f:
        payload = f.read()
    whole = codec.decode_outputs([payload])
    parts = split_outputs(payload, 2)
    got = []
    for slot, part in parts.items():
        decoded = codec.decode_outputs([payload if part is None else part])
        assert all(slot_of_request(o.request_id, 2) == slot for o in decoded.outputs)
        got += decoded.outputs
    assert sorted(got, key=lambda o: o.request_id) == sorted(whole.outputs,
                                                             key=lambda o: o.request_id)


def test_garbage_raises():
    with pytest.raises((msgspec.DecodeError, msgspec.ValidationError)):
        split_outputs(b"\x93\x01", 2)
