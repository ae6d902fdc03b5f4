"""gRPC parity: greenfront against vLLM 0.32's Rust frontend (``vllm-rs serve --grpc-port``),
both on greenfront's simulator in echo mode (deterministic tokens and logprobs), called with the
same ``grpcio`` client: unary and streamed answers equal field by field, the same status codes
for bad input, cancel and Abort, every Control RPC and the health answers.

Deliberate differences (docs/grpc.md §3, §7) are not compared: ``num_sequences > 1`` on
streams, a bad regex (refused here, passed to the engine by vLLM), error message wording.
"""
from __future__ import annotations

import os
import re

import grpc
import pytest
from google.protobuf.json_format import MessageToDict

from rpc.proto import control_pb2 as c, health_pb2 as h, inference_pb2 as pb
from tests.integration.harness import GreenfrontServer, wait_for
from tests.interop.peers import requires_peers, rust_frontend_on_simulator
from tests.support.grpc_client import Client
from tests.support.processes import free_port
from tests.support.vllm_peers import rust_frontend_bin

pytestmark = [requires_peers, pytest.mark.skipif(not os.path.exists(rust_frontend_bin()),
                                                 reason="vLLM's Rust frontend not installed")]

SIM = ["--output-mode", "echo", "--itl-ms", "2", "--ttft-ms", "5", "--enable-lora",
       "--enable-sleep-mode", "--verbose"]
P = [1, 22177, 1044, 1307, 5498]
GEN, STREAM = "/vllm.Inference/Generate", "/vllm.Inference/GenerateStream"


@pytest.fixture(scope="module")
def clients(tmp_path_factory, model_dir):
    logs = str(tmp_path_factory.mktemp("grpc-parity"))
    theirs_port, ours_port = free_port(), free_port()
    with rust_frontend_on_simulator(logs, ["--grpc-port", str(theirs_port)], SIM) as theirs:
        with GreenfrontServer(model_dir, sim_args=" ".join(SIM + ["--max-model-len", "2048"]),
                              env={"GREENFRONT_GRPC_PORT": str(ours_port)}) as ours:
            with Client(f"127.0.0.1:{ours_port}") as a, Client(f"127.0.0.1:{theirs_port}") as b:
                a.sim_log = ours.log
                b.sim_log = lambda: open(os.path.join(logs, "sim.log"), errors="replace").read()
                yield a, b


def R(**kw) -> pb.GenerateRequest:
    kw.setdefault("token_ids", pb.TokenIds(ids=P))
    kw.setdefault("stopping", pb.StoppingCriteria(max_new_tokens=6))
    return pb.GenerateRequest(**kw)


def S(**kw) -> pb.StoppingCriteria:
    kw.setdefault("max_new_tokens", 9)
    return pb.StoppingCriteria(**kw)


ALL = pb.ResponseOptions(output_token_ids=True, prompt_token_ids=True)
REQUESTS = [
    R(),
    R(response=ALL),
    pb.GenerateRequest(text="Hello, of the", stopping=S(), response=ALL),
    pb.GenerateRequest(text="", stopping=S(max_new_tokens=3), response=ALL),
    R(stopping=S(stop_strings=[" ofHello"]), response=ALL),
    R(stopping=S(stop_strings=[" ofHello"], include_stop_strings=True), response=ALL),
    R(stopping=S(stop_token_ids=[5498]), response=ALL),
    R(stopping=S(min_new_tokens=3, stop_token_ids=[1044]), response=ALL),
    R(response=pb.ResponseOptions(output_logprobs=True)),
    R(response=pb.ResponseOptions(output_logprobs=True,
                                  output_candidates=pb.CandidateTokens(top_n=2))),
    R(response=pb.ResponseOptions(prompt_logprobs=True, output_logprobs=True,
                                  prompt_candidates=pb.CandidateTokens(top_n=1))),
    R(response=pb.ResponseOptions(output_text=False, output_token_ids=True)),
    R(temperature=0.7, sampling=pb.RandomSampling(seed=3, top_k=5, top_p=0.9), response=ALL),
    R(truncate_prompt_tokens=2, response=ALL),
    R(stopping=pb.StoppingCriteria(max_new_tokens=10 ** 6), token_ids=pb.TokenIds(ids=[7] * 2044),
      response=pb.ResponseOptions(output_token_ids=True)),
    R(decoding=pb.DecodingParameters(choice=pb.DecodingParameters.StringChoices(
        choices=["yes", "no"]))),
]


def merged(stream: list[dict]) -> dict:
    """A stream with each sequence's token messages joined: which engine steps share a message
    is timing (a frontend that falls behind joins them; both do), everything else is compared
    as sent: the first message (``prompt_info`` only), every field of every sequence's tokens
    in order, the finish info."""
    sequences: dict[int, dict] = {}
    for message in stream[1:]:
        output = message.get("outputs", {})
        joined = sequences.setdefault(output.get("index", 0), {})
        for key, value in output.items():
            if isinstance(value, (list, str)) or key == "numTokens":
                joined[key] = joined.get(key, type(value)()) + value
            else:
                joined[key] = value
    return {"first": stream[0], "sequences": sequences,
            "other": [m for m in stream[1:] if set(m) != {"outputs"}]}


def both(clients, path, request):
    out = []
    for client in clients:
        try:
            answer = client.call(path, request, timeout=30)
            out.append(("OK", merged([MessageToDict(m) for m in answer])
                        if isinstance(answer, list) else MessageToDict(answer)))
        except grpc.RpcError as exc:
            out.append((exc.code(), None))
    return out


@pytest.mark.parametrize("request_", REQUESTS, ids=range(len(REQUESTS)))
@pytest.mark.parametrize("path", [GEN, STREAM])
def test_answers_equal(clients, path, request_):
    ours, theirs = both(clients, path, request_)
    assert ours == theirs


BAD = [
    pb.GenerateRequest(), pb.GenerateRequest(token_ids=pb.TokenIds()), R(model="nope"),
    R(lora_name="nope"), R(token_ids=pb.TokenIds(ids=[10 ** 9])),
    R(sampling=pb.RandomSampling(top_p=2.0)), R(sampling=pb.RandomSampling(min_p=1.5)),
    R(temperature=-1), R(stopping=pb.StoppingCriteria(min_new_tokens=9, max_new_tokens=3)),
    R(response=pb.ResponseOptions(output_logprobs=True,
                                  output_candidates=pb.CandidateTokens(top_n=21))),
    R(response=pb.ResponseOptions(prompt_logprobs=True,
                                  prompt_candidates=pb.CandidateTokens(top_n=21))),
    R(response=pb.ResponseOptions(prompt_logprobs=True, prompt_candidates=pb.CandidateTokens(
        token_ids=pb.TokenIds(ids=[5])))),
    R(decoding=pb.DecodingParameters(json="{not json")),
    R(decoding=pb.DecodingParameters(choice=pb.DecodingParameters.StringChoices())),
    R(decoding=pb.DecodingParameters(logit_bias={10 ** 8: 1.0})),
    R(decoding=pb.DecodingParameters(allowed_token_ids=[10 ** 8])),
    R(stopping=pb.StoppingCriteria(stop_token_ids=[10 ** 8])),
    R(stopping=pb.StoppingCriteria(stop_strings=[""])),
    R(stopping=pb.StoppingCriteria(thinking_token_budget=-5)),
    R(token_ids=pb.TokenIds(ids=[7] * 2048)),
    R(sampling=pb.RandomSampling(num_sequences=2)),
]


@pytest.mark.parametrize("request_", BAD, ids=range(len(BAD)))
def test_status_codes_for_bad_input(clients, request_):
    for path in (GEN, STREAM):
        ours, theirs = both(clients, path, request_)
        assert ours[0] == theirs[0] != "OK", path


def test_cancel_aborts_the_engine_request(clients):
    """The simulator (--verbose) logs each ABORT with how many of its requests were live."""
    for client in clients:
        stream = client.method(STREAM)(R(request_id="parity-cancel", stopping=S(
            max_new_tokens=20000, ignore_eos=True)), timeout=60)
        next(stream)
        next(stream)
        stream.cancel()
        aborted = re.compile(r"ABORT \[[^]]*parity-cancel[^]]*\] \(1 live\)")
        assert wait_for(lambda: aborted.search(client.sim_log()), timeout=10)


def test_abort_rpc_ends_the_stream_aborted(clients):
    lasts = []
    for client in clients:
        stream = client.method(STREAM)(R(request_id="parity-abort", response=ALL,
                                         stopping=S(max_new_tokens=20000, ignore_eos=True)),
                                       timeout=60)
        next(stream)
        next(stream)
        client.call("/vllm.Control/Abort", c.AbortRequest(request_ids=["parity-abort", "x"]))
        last = MessageToDict(list(stream)[-1])
        last["outputs"]["finishInfo"].pop("numOutputTokens")  # how far each got varies
        lasts.append(last)
    assert lasts[0] == lasts[1] == {"outputs": {"finishInfo": {
        "finishReason": "ABORTED", "numCachedTokens": 0}}}


CONTROL = [
    ("GetServerInfo", None), ("GetModelInfo", None), ("Shutdown", None), ("ListLoras", None),
    ("LoadLora", c.LoadLoraRequest(lora_name="a", source_path="/tmp/a")),
    ("LoadLora", c.LoadLoraRequest(lora_name="tiny", source_path="org/x")),
    ("UnloadLora", c.UnloadLoraRequest(lora_name="a")), ("UnloadLora", None),
    ("GetKvEventSources", None), ("Abort", c.AbortRequest(request_ids=["none"])),
    ("PauseGeneration", c.PauseGenerationRequest(mode=c.PAUSE_MODE_KEEP)), ("IsPaused", None),
    ("ResumeGeneration", None), ("IsPaused", None),
    ("PauseGeneration", c.PauseGenerationRequest(mode=9)),
    ("Sleep", c.SleepRequest(level=1)), ("IsSleeping", None), ("WakeUp", None),
    ("IsSleeping", None), ("UpdateWeightVersion", None),
    ("UpdateWeightVersion", c.UpdateWeightVersionRequest(weight_version="v2")),
    ("GetWeightVersion", None),
    ("UpdateWeightVersion", c.UpdateWeightVersionRequest(weight_version="default")),
    ("InitWeightTransferEngine", None), ("StartWeightUpdate", None),
    ("StartDraftWeightUpdate", None), ("UpdateWeights", None), ("FinishWeightUpdate", None),
]
#: Differ by deployment, not by frontend.
VARYING = {"instanceId", "modelId"}


def test_control_answers(clients):
    service = c.DESCRIPTOR.services_by_name["Control"]
    assert {name for name, _ in CONTROL} == {m.name for m in service.methods}
    for name, request_ in CONTROL:
        if request_ is None:
            request_ = getattr(c, service.methods_by_name[name].input_type.name)()
        ours, theirs = both(clients, f"/vllm.Control/{name}", request_)
        for answer in (ours, theirs):
            if isinstance(answer[1], dict):
                for key in VARYING:
                    answer[1].pop(key, None)
        assert ours == theirs, name


def test_health(clients):
    for service in ("", "vllm.Inference", "vllm.Control", "vllm.Nope"):
        ours, theirs = both(clients, "/grpc.health.v1.Health/Check",
                            h.HealthCheckRequest(service=service))
        assert ours == theirs, service
