"""gRPC ``vllm.Inference`` and health on a real deployment (gunicorn + the simulator in echo
mode), called with a real ``grpcio`` client: unary and streamed answers, the first message's
``prompt_info``, stop strings and EOS, logprobs, n > 1 on streams, status codes for bad input,
cancellation and deadlines aborting the engine request, many calls on one connection."""
from __future__ import annotations

import threading

import grpc
import pytest

from rpc.proto import health_pb2, inference_pb2 as pb
from tests.integration.harness import deployment, wait_for
from tests.support.grpc_client import Client
from tests.support.processes import free_port

PROMPT = [1, 22177, 1044, 1307]  # "<s>Hello, of"; echo emits 22177, 1044, 1307, 22177, ...
GEN = "/vllm.Inference/Generate"
STREAM = "/vllm.Inference/GenerateStream"


@pytest.fixture(scope="module")
def grpc_server(model_dir):
    port = free_port()
    with deployment(model_dir, sim_args="--output-mode echo --itl-ms 2 --ttft-ms 5",
                          env={"GREENFRONT_GRPC_PORT": str(port)}) as srv:
        srv.grpc_target = f"127.0.0.1:{port}"
        yield srv


@pytest.fixture
def client(grpc_server):
    with Client(grpc_server.grpc_target) as c:
        yield c


def request(**kw) -> pb.GenerateRequest:
    kw.setdefault("token_ids", pb.TokenIds(ids=PROMPT))
    return pb.GenerateRequest(**kw)


def test_unary_generate(client):
    r = client.call(GEN, request(stopping=pb.StoppingCriteria(max_new_tokens=5),
                                 response=pb.ResponseOptions(output_token_ids=True,
                                                             prompt_token_ids=True)))
    assert r.prompt_info.num_prompt_tokens == 4 and list(r.prompt_info.token_ids) == PROMPT
    out = r.outputs
    assert list(out.token_ids) == [22177, 1044, 1307, 22177, 1044]
    assert out.text == "Hello, ofHello," and out.num_tokens == 5
    assert out.finish_info.finish_reason == pb.FinishInfo.LENGTH
    assert out.finish_info.num_output_tokens == 5
    assert out.finish_info.HasField("num_cached_tokens")


def test_stream_first_message_is_prompt_info_then_chunks(client):
    msgs = client.call(STREAM, request(stopping=pb.StoppingCriteria(max_new_tokens=4),
                                       response=pb.ResponseOptions(output_token_ids=True)))
    assert msgs[0].HasField("prompt_info") and not msgs[0].HasField("outputs")
    assert msgs[0].prompt_info.num_prompt_tokens == 4
    chunks = [m.outputs for m in msgs[1:]]
    assert all(not m.HasField("prompt_info") for m in msgs[1:])
    assert [t for c in chunks for t in c.token_ids] == [22177, 1044, 1307, 22177]
    assert "".join(c.text for c in chunks) == "Hello, ofHello"
    assert [c.HasField("finish_info") for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].finish_info.finish_reason == pb.FinishInfo.LENGTH


def test_stop_string_cut_from_text_token_kept(client):
    r = client.call(GEN, request(
        stopping=pb.StoppingCriteria(max_new_tokens=8, stop_strings=[" ofHello"]),
        response=pb.ResponseOptions(output_token_ids=True)))
    assert r.outputs.text == "Hello,"
    assert list(r.outputs.token_ids) == [22177, 1044, 1307, 22177]
    assert r.outputs.finish_info.finish_reason == pb.FinishInfo.STOP
    assert r.outputs.finish_info.stop_string == " ofHello"


def test_text_prompt_and_logprobs(client):
    r = client.call(GEN, pb.GenerateRequest(
        text="Hello, of", stopping=pb.StoppingCriteria(max_new_tokens=3),
        response=pb.ResponseOptions(output_logprobs=True, prompt_token_ids=True,
                                    output_candidates=pb.CandidateTokens(top_n=2))))
    assert list(r.prompt_info.token_ids) == PROMPT  # the BOS added, as vLLM tokenizes
    assert len(r.outputs.logprobs) == 3 and len(r.outputs.ranks) == 3
    assert all(1 <= len(c.tokens) <= 2 for c in r.outputs.candidate_tokens)


def test_num_sequences_streamed(client):
    msgs = client.call(STREAM, request(temperature=0.8,
                                       sampling=pb.RandomSampling(num_sequences=2, seed=7),
                                       stopping=pb.StoppingCriteria(max_new_tokens=3)))
    finished = [m.outputs.index for m in msgs[1:] if m.outputs.HasField("finish_info")]
    assert sorted(finished) == [0, 1]


@pytest.mark.parametrize("req, code", [
    (pb.GenerateRequest(), grpc.StatusCode.INVALID_ARGUMENT),  # no prompt
    (pb.GenerateRequest(token_ids=pb.TokenIds()), grpc.StatusCode.INVALID_ARGUMENT),
    (request(model="nope"), grpc.StatusCode.NOT_FOUND),
    (request(lora_name="nope"), grpc.StatusCode.FAILED_PRECONDITION),
    (request(token_ids=pb.TokenIds(ids=[10**9])), grpc.StatusCode.INVALID_ARGUMENT),
    (request(sampling=pb.RandomSampling(top_p=2.0)), grpc.StatusCode.INVALID_ARGUMENT),
    (request(stopping=pb.StoppingCriteria(min_new_tokens=9, max_new_tokens=3)),
     grpc.StatusCode.INVALID_ARGUMENT),
    (request(response=pb.ResponseOptions(
        output_logprobs=True, output_candidates=pb.CandidateTokens(top_n=21))),
     grpc.StatusCode.INVALID_ARGUMENT),
    (request(decoding=pb.DecodingParameters(json="{not json")), grpc.StatusCode.INVALID_ARGUMENT),
    (request(decoding=pb.DecodingParameters(regex="(")), grpc.StatusCode.INVALID_ARGUMENT),
    (request(sampling=pb.RandomSampling(num_sequences=2)), grpc.StatusCode.INVALID_ARGUMENT),
])
def test_bad_input_status(client, req, code):
    for path in (GEN, STREAM):
        if path == STREAM and req.sampling.num_sequences == 2:
            continue  # served on streams
        with pytest.raises(grpc.RpcError) as info:
            client.call(path, req, timeout=10)
        assert info.value.code() == code, (path, info.value.details())


def test_empty_text_prompt_is_accepted(client):
    r = client.call(GEN, pb.GenerateRequest(text="", stopping=pb.StoppingCriteria(
        max_new_tokens=2)))
    assert r.outputs.finish_info.num_output_tokens == 2


def test_many_concurrent_calls_on_one_connection(client):
    futures = [client.method(GEN).future(request(stopping=pb.StoppingCriteria(
        max_new_tokens=3 + i % 3))) for i in range(40)]
    counts = [f.result(timeout=30).outputs.num_tokens for f in futures]
    assert counts == [3 + i % 3 for i in range(40)]


def _in_flight(server) -> int:
    import requests

    return requests.get(server.url + "/load", timeout=5).json()["server_load"]


def test_cancel_aborts_the_engine_request(grpc_server, client):
    stream = client.method(STREAM)(request(stopping=pb.StoppingCriteria(max_new_tokens=20000,
                                                                        ignore_eos=True)))
    first = next(stream)
    assert first.HasField("prompt_info")
    next(stream)
    assert _in_flight(grpc_server) == 1
    stream.cancel()
    assert wait_for(lambda: _in_flight(grpc_server) == 0, timeout=10)


def test_deadline_aborts_the_engine_request(grpc_server, client):
    with pytest.raises(grpc.RpcError) as info:
        client.call(STREAM, request(stopping=pb.StoppingCriteria(max_new_tokens=20000,
                                                                 ignore_eos=True)), timeout=0.5)
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert wait_for(lambda: _in_flight(grpc_server) == 0, timeout=10)


def test_unknown_method_is_unimplemented(client):
    with pytest.raises(grpc.RpcError) as info:
        client.channel.unary_unary("/vllm.Inference/Nope")(b"", timeout=5)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_health(client):
    check = "/grpc.health.v1.Health/Check"
    for service in ("", "vllm.Inference", "vllm.Control"):
        r = client.call(check, health_pb2.HealthCheckRequest(service=service))
        assert r.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as info:
        client.call(check, health_pb2.HealthCheckRequest(service="nope"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_compressed_request_is_refused(grpc_server):
    channel = grpc.insecure_channel(grpc_server.grpc_target, compression=grpc.Compression.Gzip)
    try:
        with pytest.raises(grpc.RpcError) as info:
            channel.unary_unary(GEN, request_serializer=pb.GenerateRequest.SerializeToString,
                                response_deserializer=pb.GenerateResponse.FromString)(
                request(), timeout=10)
        assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        channel.close()


def test_threads_share_the_channel(client):
    errors: list = []

    def run() -> None:
        try:
            msgs = client.call(STREAM, request(stopping=pb.StoppingCriteria(max_new_tokens=6)))
            assert msgs[-1].outputs.finish_info.num_output_tokens == 6
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _successes(server) -> float:
    import re

    import requests

    text = requests.get(server.url + "/metrics", timeout=5).text
    found = re.search(r'^vllm:request_success_total\{[^}]*finished_reason="length"[^}]*\} (\S+)$',
                      text, re.M)
    return float(found.group(1)) if found else 0.0


def test_generations_count_in_the_metrics(grpc_server, client):
    before = _successes(grpc_server)
    client.call(GEN, request(stopping=pb.StoppingCriteria(max_new_tokens=2)))
    client.call(STREAM, request(stopping=pb.StoppingCriteria(max_new_tokens=2)))
    assert wait_for(lambda: _successes(grpc_server) >= before + 2, timeout=10)
