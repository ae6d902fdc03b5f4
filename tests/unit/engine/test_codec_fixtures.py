"""Golden wire fixtures (tests/compat/engine-core-fixtures) against engine.protocol.

Three checks per fixture:
* decode: our codec's result equals the fixture's ``decoded`` JSON field by field
  (every fixture; set-valued fields compared as sets). Captured fixtures are
  compared exactly too: we decode the very bytes their JSON was made from, so
  the run-to-run fields the fixtures' README warns about cannot differ here.
* round trip: decode, re-encode, same bytes (every fixture, captured included).
* build like vLLM: for derived fixtures, build the message from the JSON the way
  vLLM's code builds it (SamplingParams with only the non-default fields set,
  structs from their fields, arrays via encode_ndarray) and compare bytes. All
  derived fixtures are byte-identical; no exceptions were needed.

And two fixtures read by name: a registration with 0.33's keys, the logprobs helper. The codec
on hand-written messages: ``test_codec_cases.py``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import msgspec
import pytest
from msgspec.msgpack import Ext

from engine.protocol import (
    ENGINE_CORE_DEAD,
    EngineCoreEvent,
    EngineCoreOutput,
    EngineCoreOutput032,
    EngineCoreOutputs,
    EngineCoreReadyResponse,
    EngineCoreRequest,
    EngineZmqAddresses,
    LogprobsLists,
    LogprobsTensors,
    LoRARequest,
    PrefillStats,
    PrefixCacheStats,
    ProtocolError,
    SamplingParams,
    SchedulerStats,
    UtilityOutput,
    decode_handshake_status,
    decode_init,
    decode_outputs,
    decode_registration,
    decode_request,
    encode_abort,
    encode_add,
    encode_hello,
    encode_init,
    encode_ndarray,
    encode_outputs,
    encode_ready,
    encode_registration,
    encode_utility,
    is_engine_dead,
    logprobs_lists_to_python,
    ndarray_to_list,
)

FIXTURE_DIR = Path(__file__).resolve().parents[2] / "compat" / "engine-core-fixtures"
INDEX = json.loads((FIXTURE_DIR / "index.json").read_text())
FIXTURES = INDEX["fixtures"]
DERIVED = [f for f in FIXTURES if f["source"] == "derived"]
KINDS = {"ADD", "ABORT", "UTILITY", "OUTPUTS", "REGISTRATION", "HANDSHAKE_IN", "HANDSHAKE_OUT", "DEAD"}
# Python sets on the engine/frontend side: wire order is arbitrary.
SET_FIELDS = {"_all_stop_token_ids", "stop_token_ids", "finished_requests"}


def _frames(fx: dict) -> list[bytes]:
    return [(FIXTURE_DIR / fr["file"]).read_bytes() for fr in fx["frames"]]


def _ids(fixtures: list[dict]) -> list[str]:
    return [f["name"] for f in fixtures]


# ----------------------------------------------------------------- comparison


def _field_map(cls: type) -> dict[str, msgspec.structs.FieldInfo]:
    return {f.encode_name: f for f in msgspec.structs.fields(cls)}


def _field_default(info: msgspec.structs.FieldInfo) -> Any:
    if info.default_factory is not msgspec.NODEFAULT:
        return info.default_factory()
    return info.default


def _check_ndarray(ours: Any, want: dict, frames: list[bytes], path: str) -> None:
    assert isinstance(ours, list) and len(ours) == 3, path
    dtype, shape, data = ours
    assert dtype == want["dtype"], path
    assert shape == want["shape"], path
    if want["location"] == "inline_ext3":
        assert isinstance(data, Ext) and data.code == 3, path
        assert len(data.data) == want["nbytes"], path
    else:
        assert data == want["aux_frame"], path
        assert len(frames[data]) == want["nbytes"], path
    assert ndarray_to_list(ours, frames) == want["values"], path


def _expect(ours: Any, want: Any, path: str, frames: list[bytes]) -> None:
    """Assert ``ours`` (our decoded object) means what the fixture JSON ``want`` says."""
    if isinstance(want, dict) and "$ndarray" in want:
        _check_ndarray(ours, want["$ndarray"], frames, path)
    elif isinstance(want, dict) and "$map" in want:
        assert isinstance(ours, dict), path
        assert ours == {k: v for k, v in want["$map"]}, path
    elif isinstance(want, dict) and "$float" in want:
        assert ours == float(want["$float"]), path
    elif isinstance(want, dict) and "$bin" in want:
        assert ours == bytes.fromhex(want["$bin"]), path
    elif isinstance(want, dict) and isinstance(ours, UtilityOutput):
        assert list(want) == ["call_id", "failure_message", "result"], path
        assert ours.call_id == want["call_id"] and ours.failure_message == want["failure_message"], path
        if want["result"] is None:
            assert ours.result is None, path
        else:
            assert isinstance(ours.result, list) and len(ours.result) == 2, path
            _expect(ours.result[0], want["result"]["type_info"], path + ".type_info", frames)
            _expect(ours.result[1], want["result"]["value"], path + ".value", frames)
    elif isinstance(want, dict) and isinstance(ours, msgspec.Struct):
        cls = type(ours)
        fields = _field_map(cls)
        if cls.__struct_config__.array_like:
            # Positional: the fixture lists the fields in wire order; we may know more (0.33 `error`).
            names = [f.encode_name for f in msgspec.structs.fields(cls)]
            assert list(want) == names[: len(want)], f"{path}: field order"
            for extra in names[len(want):]:
                assert getattr(ours, fields[extra].name) == _field_default(fields[extra]), f"{path}.{extra}"
        else:
            for key, info in fields.items():
                if key not in want:  # omitted on the wire => default
                    assert getattr(ours, info.name) == _field_default(info), f"{path}.{key} should be default"
        for key, value in want.items():
            assert key in fields, f"{path}.{key} unknown to {cls.__name__}"
            _expect(getattr(ours, fields[key].name), value, f"{path}.{key}", frames)
    elif isinstance(want, dict):
        assert isinstance(ours, dict) and list(ours) == list(want), path
        for key, value in want.items():
            _expect(ours[key], value, f"{path}.{key}", frames)
    elif isinstance(want, list):
        assert isinstance(ours, (list, tuple)), path
        if path.rsplit(".", 1)[-1] in SET_FIELDS:
            assert sorted(ours) == sorted(want), path
        else:
            assert len(ours) == len(want), path
            for i, (a, b) in enumerate(zip(ours, want)):
                _expect(a, b, f"{path}[{i}]", frames)
    elif isinstance(want, float):
        assert isinstance(ours, float) and (ours == want or (math.isnan(ours) and math.isnan(want))), path
    else:
        # bool vs int matters on the wire.
        assert type(ours) is type(want) and ours == want, f"{path}: {ours!r} != {want!r}"


def _decode(fx: dict, frames: list[bytes]) -> Any:
    kind = fx["kind"]
    if kind in ("ADD", "ABORT", "UTILITY"):
        type_byte, obj = decode_request(frames[1:])
        assert type_byte == bytes.fromhex(fx["decoded"]["request_type_byte"])
        return obj
    if kind == "OUTPUTS":
        return decode_outputs(frames)
    if kind == "REGISTRATION":
        return decode_registration(frames[1])
    if kind == "HANDSHAKE_IN":
        return decode_handshake_status(frames[1])
    if kind == "HANDSHAKE_OUT":
        return decode_init(frames[1])
    if kind == "DEAD":
        return decode_outputs(frames)
    raise AssertionError(kind)


# ---------------------------------------------------------------------- tests


def test_fixture_set_is_complete() -> None:
    assert {f["kind"] for f in FIXTURES} == KINDS
    assert len(FIXTURES) == 152
    for fx in FIXTURES:
        for fr, data in zip(fx["frames"], _frames(fx)):
            assert len(data) == fr["len"]
            if "hex" in fr:
                assert data.hex() == fr["hex"]


@pytest.mark.parametrize("fx", FIXTURES, ids=_ids(FIXTURES))
def test_decode_matches_fixture(fx: dict) -> None:
    frames = _frames(fx)
    decoded = fx["decoded"]
    ours = _decode(fx, frames)
    kind = fx["kind"]
    if kind == "DEAD":
        assert ours is None and is_engine_dead(frames)
        assert decoded == {"sentinel": ENGINE_CORE_DEAD.decode()}
        return
    assert not is_engine_dead(frames)
    if "identity_hex" in decoded:
        assert frames[0].hex() == decoded["identity_hex"]
    payload = decoded["payload"]
    if kind == "ABORT":
        assert ours == payload["request_ids"]
    elif kind == "UTILITY":
        assert list(payload) == ["client_index", "call_id", "method", "args"]
        _expect(list(ours), list(payload.values()), "utility", frames)
    else:
        _expect(ours, payload, kind.lower(), frames)


def _to_032(out: EngineCoreOutput) -> EngineCoreOutput032:
    return EngineCoreOutput032(*(getattr(out, f) for f in EngineCoreOutput032.__struct_fields__))


@pytest.mark.parametrize("fx", FIXTURES, ids=_ids(FIXTURES))
def test_round_trip_is_byte_identical(fx: dict) -> None:
    frames = _frames(fx)
    obj = _decode(fx, frames)
    kind = fx["kind"]
    if kind == "ADD":
        again = encode_add(frames[0], obj)
    elif kind == "ABORT":
        again = encode_abort(frames[0], obj)
    elif kind == "UTILITY":
        again = encode_utility(frames[0], *obj)
    elif kind == "OUTPUTS":
        # A 0.32 engine sends 18-element outputs; our decoder's class has 0.33's 19.
        obj.outputs = [_to_032(o) for o in obj.outputs]
        again = encode_outputs(obj, frames[1:])
    elif kind == "REGISTRATION":
        again = [frames[0], encode_registration(obj)]
    elif kind == "HANDSHAKE_IN":
        encode = encode_hello if obj.status == "HELLO" else encode_ready
        extra = [obj.parallel_config_hash] if obj.status == "READY" else []
        again = [frames[0], encode(obj.local, obj.headless, *extra)]
    elif kind == "HANDSHAKE_OUT":
        again = [frames[0], encode_init(obj.addresses, obj.parallel_config)]
    else:
        again = [ENGINE_CORE_DEAD]
    assert again == frames


# ------------------------------------------- build from JSON as vLLM would


_SP_FIELDS = _field_map(SamplingParams)


def _plain(value: Any) -> Any:
    if isinstance(value, dict) and "$map" in value:
        return {k: _plain(v) for k, v in value["$map"]}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _build_request(payload: dict) -> EngineCoreRequest:
    fields = dict(payload)
    sp = fields["sampling_params"]
    if sp is not None:
        # Only the keys vLLM sent, i.e. the non-default ones: omit_defaults does the rest.
        fields["sampling_params"] = SamplingParams(**{_SP_FIELDS[k].name: _plain(v) for k, v in sp.items()})
    if fields["lora_request"] is not None:
        fields["lora_request"] = LoRARequest(**fields["lora_request"])
    return EngineCoreRequest(**{k: _plain(v) if k != "sampling_params" and k != "lora_request" else v for k, v in fields.items()})


def _flatten(values: list) -> list:
    if values and isinstance(values[0], list):
        return [v for row in values for v in row]
    return values


def _array(value: Any, aux: list[bytes]) -> Any:
    if isinstance(value, dict) and "$ndarray" in value:
        nd = value["$ndarray"]
        return encode_ndarray(_flatten(nd["values"]), nd["dtype"], nd["shape"], aux)
    return value


def _build_output(o: dict, aux: list[bytes]) -> EngineCoreOutput032:
    o = dict(o)
    if o["new_logprobs"] is not None:
        o["new_logprobs"] = LogprobsLists(*(_array(v, aux) for v in o["new_logprobs"].values()))
    if o["new_prompt_logprobs_tensors"] is not None:
        o["new_prompt_logprobs_tensors"] = LogprobsTensors(
            *(_array(v, aux) for v in o["new_prompt_logprobs_tensors"].values())
        )
    if o["events"] is not None:
        o["events"] = [EngineCoreEvent(**e) for e in o["events"]]
    if o["prefill_stats"] is not None:
        o["prefill_stats"] = PrefillStats(**o["prefill_stats"])
    return EngineCoreOutput032(**o)


def _build_outputs(payload: dict, aux: list[bytes]) -> EngineCoreOutputs:
    p = dict(payload)
    p["outputs"] = [_build_output(o, aux) for o in p["outputs"]]
    if p["scheduler_stats"] is not None:
        stats = dict(p["scheduler_stats"])
        stats["prefix_cache_stats"] = PrefixCacheStats(**stats["prefix_cache_stats"])
        p["scheduler_stats"] = SchedulerStats(**stats)
    if p["utility_output"] is not None:
        u = p["utility_output"]
        result = None if u["result"] is None else [u["result"]["type_info"], u["result"]["value"]]
        p["utility_output"] = UtilityOutput(u["call_id"], u["failure_message"], result)
    return EngineCoreOutputs(**p)


@pytest.mark.parametrize("fx", DERIVED, ids=_ids(DERIVED))
def test_built_like_vllm_is_byte_identical(fx: dict) -> None:
    frames = _frames(fx)
    decoded = fx["decoded"]
    kind = fx["kind"]
    identity = bytes.fromhex(decoded.get("identity_hex", ""))
    payload = decoded.get("payload")
    if kind == "ADD":
        built = encode_add(identity, _build_request(payload))
    elif kind == "ABORT":
        built = encode_abort(identity, payload["request_ids"])
    elif kind == "UTILITY":
        args = payload["args"]
        if payload["method"] == "add_lora":
            args = [LoRARequest(*args[0])]  # a struct argument travels as its array
        built = encode_utility(identity, payload["client_index"], payload["call_id"], payload["method"], args)
    elif kind == "OUTPUTS":
        aux: list[bytes] = []
        built = encode_outputs(_build_outputs(payload, aux), aux)
    elif kind == "REGISTRATION":
        built = [identity, encode_registration(EngineCoreReadyResponse(**payload))]
    elif kind == "HANDSHAKE_IN":
        if payload["status"] == "HELLO":
            built = [identity, encode_hello(payload["local"], payload["headless"])]
        else:
            built = [identity, encode_ready(payload["local"], payload["headless"], payload.get("parallel_config_hash"))]
    elif kind == "HANDSHAKE_OUT":
        built = [identity, encode_init(EngineZmqAddresses(**payload["addresses"]), payload["parallel_config"])]
    else:
        built = [ENGINE_CORE_DEAD]
    assert built == frames


# ------------------------------------------------- fixtures read by name


def test_registration_tolerates_033_keys_and_missing_optionals() -> None:
    fx = next(f for f in FIXTURES if f["name"] == "registration_ready_response")
    payload = dict(fx["decoded"]["payload"])
    for key in ("mamba_block_size", "kv_events_config", "effective_attention_block_size"):
        del payload[key]
    payload.update(coord_store_port=0, coordinator_input_address=None, coordinator_output_address=None)
    reg = decode_registration(msgspec.msgpack.encode(payload))
    assert reg.max_model_len == 2048 and reg.effective_attention_block_size is None
    # Always all 25 keys, spec order.
    assert list(msgspec.msgpack.decode(encode_registration(reg))) == list(fx["decoded"]["payload"])
    with pytest.raises(ProtocolError):
        decode_registration(b"")
    with pytest.raises(ProtocolError):
        decode_registration(msgspec.msgpack.encode({"max_model_len": 1}))


def test_logprobs_helper_on_inline_and_aux_fixtures() -> None:
    by_name = {f["name"]: f for f in FIXTURES}
    frames = _frames(by_name["outputs_logprobs_aux_frames"])
    out = decode_outputs(frames).outputs[0]
    ids, lps, ranks = logprobs_lists_to_python(out.new_logprobs, frames)
    assert ids == [list(range(1000, 1080))] and ranks == [1] and lps[0][:3] == [-0.0, -0.125, -0.25]
    frames = _frames(by_name["outputs_prompt_logprobs_inline"])
    out = decode_outputs(frames).outputs[0]
    ids, lps, ranks = logprobs_lists_to_python(out.new_prompt_logprobs_tensors, frames)
    assert ids == [[22177, 5, 6], [1044, 7, 8]] and ranks == [900, 3]
    raw = [out.new_prompt_logprobs_tensors.logprob_token_ids, out.new_prompt_logprobs_tensors.logprobs,
           out.new_prompt_logprobs_tensors.selected_token_ranks]
    assert logprobs_lists_to_python(raw, frames) == (ids, lps, ranks)
