"""engine.protocol's codec on hand-written messages: the byte examples of
docs/engine-protocol.md §10, arrays shorter and longer than the structs, what it refuses, the
ENGINE_CORE_DEAD sentinel, ndarrays and finish reasons. The golden wire fixtures:
``test_codec_fixtures.py``."""

from __future__ import annotations

import msgspec
import pytest
from msgspec.msgpack import Ext

from engine.protocol import (
    ENGINE_CORE_DEAD,
    EngineCoreOutput032,
    EngineCoreOutputs,
    EngineCoreRequest,
    FinishReason,
    NdarrayError,
    ProtocolError,
    RequestType,
    SamplingParams,
    SchedulerStats,
    decode_outputs,
    decode_request,
    encode_add,
    encode_ndarray,
    encode_outputs,
    finish_reason_str,
    is_engine_dead,
    ndarray_to_list,
)


def test_spec_10_1_add_bytes() -> None:
    sp = SamplingParams(
        temperature=0.0, stop=[], stop_token_ids=[], max_tokens=8, output_kind=1, skip_clone=True,
        eos_token_id=2, all_stop_token_ids=[2], bad_words=[], skip_reading_prefix_cache=False,
    )
    req = EngineCoreRequest("req-1-1a2b3c4d", [1, 15043, 3186], None, sp, None, 1700000000.0, None, None, None,
                            external_req_id="req-1")
    frames = encode_add(b"\x00\x00", req)
    assert frames[:2] == [b"\x00\x00", RequestType.ADD]
    assert frames[2].hex() == (
        "dc0016ae7265712d312d31613262336334649301cd3ac3cd0c72c0de000aab74656d7065726174757265cb000000000000"
        "0000a473746f7090ae73746f705f746f6b656e5f69647390aa6d61785f746f6b656e7308ab6f75747075745f6b696e6401"
        "aa736b69705f636c6f6e65c3ad5f656f735f746f6b656e5f696402b35f616c6c5f73746f705f746f6b656e5f6964739102"
        "a96261645f776f72647390b9736b69705f72656164696e675f7072656669785f6361636865c2c0cb41d954fc40000000c0"
        "c0c0c0c0000000c0c2a57265712d31c0c0c2c0c0"
    )


def test_spec_10_3_nine_element_add_and_short_arrays() -> None:
    payload = bytes.fromhex(
        "99a672312d6d696e9401cd03f2cd03f3cd03f4c084ab74656d7065726174757265cb0000000000000000aa6d61785f746f"
        "6b656e7304ad5f656f735f746f6b656e5f696402b35f616c6c5f73746f705f746f6b656e5f6964739102c0cb41dac355b8"
        "722427c0c0c0"
    )
    kind, req = decode_request([RequestType.ADD, payload])
    assert kind == RequestType.ADD and req.request_id == "r1-min"
    assert req.prompt_token_ids == [1, 1010, 1011, 1012]
    assert req.sampling_params.max_tokens == 4 and req.sampling_params.eos_token_id == 2
    assert req.client_index == 0 and req.kv_hints is None
    with pytest.raises(ProtocolError):  # fewer than the 9 required elements
        decode_request([RequestType.ADD, msgspec.msgpack.encode(["r", [1], None, None])])


@pytest.mark.parametrize("bad_id", [-1, 2**31])
def test_a_prompt_id_no_engine_can_hold_is_an_undecodable_add(bad_id: int) -> None:
    payload = msgspec.msgpack.encode(["r", [1, bad_id], None, None, None, 1.0, None, None, None])
    with pytest.raises(ProtocolError, match=r"\$\[1\]\[1\]"):  # the prompt, its second id
        decode_request([RequestType.ADD, payload])
    kind, req = decode_request([RequestType.ADD, msgspec.msgpack.encode(
        ["r", [0, 2**31 - 1], None, None, None, 1.0, None, None, None])])
    assert req.prompt_token_ids == [0, 2**31 - 1]


def test_vllm_rs_style_add_decodes() -> None:
    # docs/engine-protocol.md §10.2: float32 floats, defaults sent explicitly.
    payload = msgspec.msgpack.encode(
        ["cmpl-1", [6, 7], None,
         {"temperature": 0.7, "max_tokens": 5, "min_tokens": 0, "_eos_token_id": 2, "_all_stop_token_ids": [2, 5],
          "stop_token_ids": [5], "future_key": 1},
         None, 1.0, None, None, None, None, None, 0, 0, 0, None, False, "cmpl-1", None,
         {"chat_template_kwargs": {}}, False, None, None, "a 23rd element from the future"]
    )
    _, req = decode_request([RequestType.ADD, payload])
    assert req.sampling_params.stop_token_ids == [5] and set(req.sampling_params.all_stop_token_ids) == {2, 5}
    assert req.reasoning_parser_kwargs == {"chat_template_kwargs": {}}


def test_outputs_tolerate_short_and_long_arrays() -> None:
    short = msgspec.msgpack.encode([1, [["r", [5]]]])
    out = decode_outputs([short])
    assert out.engine_index == 1 and out.outputs[0].new_token_ids == [5] and out.outputs[0].finish_reason is None
    assert out.weight_version is None
    long_output = ["r", [5], None, None, None, 3, None] + [None] * 6 + [0] + [None] * 4 + [
        {"code": "engine_paused", "message": "m", "retryable": True}, "future"]
    out = decode_outputs([msgspec.msgpack.encode([0, [long_output], None, 1.0, None, None, None, None, "v", "x"])])
    assert out.outputs[0].error["code"] == "engine_paused"
    assert finish_reason_str(out.outputs[0].finish_reason) == "error"


@pytest.mark.parametrize("code", [1, 2, 9])
def test_outputs_reject_pickle_and_unknown_ext(code: int) -> None:
    payload = msgspec.msgpack.encode([0, [["r", [1], ["<i4", [1], Ext(code, b"\x00" * 4)], None]]])
    with pytest.raises(ProtocolError):
        decode_outputs([payload])


def test_undecodable_outputs_raise_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        decode_outputs([b"\xc1"])
    with pytest.raises(ProtocolError):
        decode_outputs([msgspec.msgpack.encode([0, "not a list"])])
    with pytest.raises(ProtocolError):
        decode_request([b"\x07", b"\x90"])


def test_engine_dead_sentinel() -> None:
    assert decode_outputs([ENGINE_CORE_DEAD]) is None
    assert is_engine_dead([memoryview(ENGINE_CORE_DEAD)])
    assert not is_engine_dead([ENGINE_CORE_DEAD, b""])
    assert not is_engine_dead([b"ENGINE_CORE_DEAF"])


def test_ndarray_dtypes_and_errors() -> None:
    assert ndarray_to_list(encode_ndarray([1, -2, 3, 4], "int64", [2, 2])) == [[1, -2], [3, 4]]
    assert ndarray_to_list(["<f2", [2], Ext(3, b"\x00\x3c\x00\xc0")]) == [1.0, -2.0]
    assert ndarray_to_list(["bfloat16", [2], Ext(3, b"\x80\x3f\x00\xc0")]) == [1.0, -2.0]
    assert ndarray_to_list(["float16", [0, 3], Ext(3, b"")]) == []
    assert ndarray_to_list(encode_ndarray([[1.5, 2.5]], "<f4")) == [[1.5, 2.5]]
    aux: list[bytes] = []
    triple = encode_ndarray(list(range(64)), "<i4", None, aux)
    assert triple[2] == 1 and len(aux[0]) == 256
    assert ndarray_to_list(triple, [b"payload", memoryview(aux[0])]) == list(range(64))
    with pytest.raises(NdarrayError):
        ndarray_to_list(["complex64", [1], Ext(3, b"\x00" * 8)])
    with pytest.raises(NdarrayError):
        ndarray_to_list(["<i4", [2], Ext(3, b"\x00" * 4)])  # shape/size mismatch
    with pytest.raises(NdarrayError):
        ndarray_to_list(["<i4", [1], 3], [b"payload"])  # no such aux frame
    with pytest.raises(NdarrayError):
        ndarray_to_list(["<i4", [1], {"shm": "x"}])


def test_finish_reason_strings() -> None:
    assert [r.openai for r in FinishReason] == ["stop", "length", "abort", "error", "repetition"]
    assert finish_reason_str(1) == "length" and finish_reason_str(99) == "error"


def test_decoding_a_big_batch() -> None:
    # The hot path: one decode per engine step (its speed is measured by the bench, not here).
    outs = [EngineCoreOutput032(f"cmpl-{i:08x}-1a2b3c4d", [1000 + i]) for i in range(1000)]
    payload = encode_outputs(EngineCoreOutputs(0, outs, SchedulerStats(), 1.0, weight_version="default"))[0]
    decoded = decode_outputs([payload])
    assert len(decoded.outputs) == 1000 and decoded.outputs[999].new_token_ids == [1999]
    assert [o.request_id for o in decoded.outputs] == [o.request_id for o in outs]
