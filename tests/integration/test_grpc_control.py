"""gRPC ``vllm.Control`` on a real deployment (gunicorn + the simulator with LoRA and sleep
mode), called with a real ``grpcio`` client: discovery, Abort of a live stream, the LoRA
lifecycle and a generation with a loaded adapter, pause and sleep, and the RPCs greenfront
answers with FAILED_PRECONDITION."""
from __future__ import annotations

import grpc
import pytest

from rpc.proto import control_pb2 as c, inference_pb2 as pb
from tests.integration.harness import deployment
from tests.support.grpc_client import Client
from tests.support.processes import free_port

PROMPT = [1, 22177, 1044, 1307]


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    port = free_port()
    loras = tmp_path_factory.mktemp("loras")
    sim = "--output-mode echo --itl-ms 2 --ttft-ms 5 --enable-lora --enable-sleep-mode"
    with deployment(model_dir, sim_args=sim, env={
            "GREENFRONT_GRPC_PORT": str(port),
            "VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES": str(loras)}) as srv:
        srv.grpc_target = f"127.0.0.1:{port}"
        srv.lora_dir = loras
        yield srv


@pytest.fixture
def client(server):
    with Client(server.grpc_target) as cl:
        yield cl


def control(client, name, request=None):
    request_type = getattr(c, c.DESCRIPTOR.services_by_name["Control"]
                           .methods_by_name[name].input_type.name)
    return client.call(f"/vllm.Control/{name}", request or request_type(), timeout=20)


def code_of(client, name, request=None):
    with pytest.raises(grpc.RpcError) as info:
        control(client, name, request)
    return info.value.code(), info.value.details()


def test_server_and_model_info(client):
    info = control(client, "GetServerInfo")
    assert info.api_version == "vllm" and info.max_model_len > 0
    assert info.parallelism.data_parallel_size_local == 1
    assert info.rl_capabilities.sleep_mode_enabled
    model = control(client, "GetModelInfo")
    assert model.served_model_name == "tiny" and model.supports_lora
    assert model.supports_text_input and model.supports_token_ids_input


def test_abort_ends_a_live_stream_with_aborted(client):
    stream = client.method("/vllm.Inference/GenerateStream")(pb.GenerateRequest(
        request_id="abort-me", token_ids=pb.TokenIds(ids=PROMPT),
        stopping=pb.StoppingCriteria(max_new_tokens=20000, ignore_eos=True)), timeout=30)
    next(stream)
    next(stream)
    control(client, "Abort", c.AbortRequest(request_ids=["abort-me", "unknown"]))
    last = list(stream)[-1].outputs
    assert last.finish_info.finish_reason == pb.FinishInfo.ABORTED
    assert last.num_tokens == 0 and last.finish_info.HasField("num_cached_tokens")


def test_lora_lifecycle(server, client):
    assert list(control(client, "ListLoras").adapters) == []
    path = str(server.lora_dir / "a")
    loaded = control(client, "LoadLora", c.LoadLoraRequest(lora_name="a", source_path=path))
    assert loaded.adapter.lora_name == "a" and loaded.adapter.source_path == path
    assert loaded.adapter.lora_id >= 1
    assert [a.lora_name for a in control(client, "ListLoras").adapters] == ["a"]
    assert code_of(client, "LoadLora", c.LoadLoraRequest(lora_name="a", source_path=path))[0] \
        == grpc.StatusCode.ALREADY_EXISTS
    r = client.call("/vllm.Inference/Generate", pb.GenerateRequest(
        token_ids=pb.TokenIds(ids=PROMPT), lora_name="a",
        stopping=pb.StoppingCriteria(max_new_tokens=2)), timeout=20)
    assert r.outputs.finish_info.num_output_tokens == 2
    control(client, "UnloadLora", c.UnloadLoraRequest(lora_name="a"))
    assert code_of(client, "UnloadLora", c.UnloadLoraRequest(lora_name="a"))[0] \
        == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("name, request_, code", [
    ("LoadLora", c.LoadLoraRequest(lora_name="b", source_path="/elsewhere/b"),
     grpc.StatusCode.INVALID_ARGUMENT),
    ("LoadLora", c.LoadLoraRequest(lora_name="tiny", source_path="org/repo"),
     grpc.StatusCode.ALREADY_EXISTS),
    ("UnloadLora", c.UnloadLoraRequest(lora_name=""), grpc.StatusCode.INVALID_ARGUMENT),
    ("Shutdown", None, grpc.StatusCode.FAILED_PRECONDITION),
    ("StartWeightUpdate", None, grpc.StatusCode.FAILED_PRECONDITION),
    ("UpdateWeights", None, grpc.StatusCode.FAILED_PRECONDITION),
    ("InitWeightTransferEngine", None, grpc.StatusCode.FAILED_PRECONDITION),
    ("FinishWeightUpdate", None, grpc.StatusCode.FAILED_PRECONDITION),
    ("StartDraftWeightUpdate", None, grpc.StatusCode.FAILED_PRECONDITION),
    ("UpdateWeightVersion", None, grpc.StatusCode.INVALID_ARGUMENT),
    ("PauseGeneration", c.PauseGenerationRequest(mode=9), grpc.StatusCode.INVALID_ARGUMENT),
])
def test_refusals(client, name, request_, code):
    assert code_of(client, name, request_)[0] == code


def test_pause_and_sleep(client):
    control(client, "PauseGeneration", c.PauseGenerationRequest(mode=c.PAUSE_MODE_KEEP))
    assert control(client, "IsPaused").paused
    control(client, "ResumeGeneration")
    assert not control(client, "IsPaused").paused
    control(client, "Sleep", c.SleepRequest(level=1))
    assert control(client, "IsSleeping").sleeping
    control(client, "WakeUp")
    assert not control(client, "IsSleeping").sleeping


def test_weight_version(client):
    control(client, "UpdateWeightVersion", c.UpdateWeightVersionRequest(weight_version="v2"))
    assert control(client, "GetWeightVersion").weight_version == "v2"
    control(client, "UpdateWeightVersion", c.UpdateWeightVersionRequest(weight_version="default"))


def test_kv_event_sources_without_publishers(client):
    assert list(control(client, "GetKvEventSources").sources) == []
