"""The committed message classes are what protoc makes of the committed .proto files, and the
.proto files keep vLLM 0.32's wire contract (package, services, field numbers)."""
from __future__ import annotations

import os

from rpc.proto import control_pb2, generate, health_pb2, inference_pb2


def test_generated_code_is_up_to_date(tmp_path):
    generate.generate(str(tmp_path))
    for name in generate.PROTOS:
        module = name.replace(".proto", "_pb2.py")
        fresh = (tmp_path / "rpc" / "proto" / module).read_text()
        with open(os.path.join(generate.HERE, module), encoding="utf-8") as f:
            assert f.read() == fresh, f"{module} is stale: python -m rpc.proto.generate"


def test_services_and_methods():
    inference = inference_pb2.DESCRIPTOR.services_by_name["Inference"]
    assert inference.full_name == "vllm.Inference"
    assert [m.name for m in inference.methods] == ["Generate", "GenerateStream"]
    control = control_pb2.DESCRIPTOR.services_by_name["Control"]
    assert control.full_name == "vllm.Control" and len(control.methods) == 21
    assert health_pb2.DESCRIPTOR.services_by_name["Health"].full_name == "grpc.health.v1.Health"


def test_field_numbers_of_the_wire_contract():
    fields = {f.name: f.number for f in inference_pb2.GenerateRequest.DESCRIPTOR.fields}
    assert fields["text"] == 3 and fields["token_ids"] == 4 and fields["temperature"] == 5
    assert fields["lora_name"] == 15 and fields["engine_reasoning_gate"] == 18
    seq = {f.name: f.number for f in inference_pb2.SequenceOutput.DESCRIPTOR.fields}
    assert seq["finish_info"] == 8 and seq["sampling_mask"] == 10
    finish = {f.name: f.number for f in inference_pb2.FinishInfo.DESCRIPTOR.fields}
    assert finish["num_cached_tokens"] == 9 and finish["ec_transfer_params"] == 8
