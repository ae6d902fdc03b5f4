"""A fake engine at the socket level, for tests of the engine client and the worker state.

A DEALER with the rank's identity on the client's request ROUTER and a PUSH on its output PULL,
speaking the wire through ``engine.protocol``'s codec: a test decides exactly what the engine
says and sees exactly what the client sent. Blocking ZMQ in the test's thread, polled while its
gevent hub runs (the client hands its results over through that hub).
"""
from __future__ import annotations

import zmq

from engine import protocol
from engine.protocol import (EngineCoreOutputs, EngineCoreReadyResponse, RequestType,
                             identity_for_rank)
from engine.tasks import SUPPORTED_TASKS_METHOD
from tests.support.waiting import wait_in_hub


class FakeEngine:
    """One engine rank, driven by the test."""

    def __init__(self, inputs: str, outputs: str, rank: int = 0) -> None:
        self.rank = rank
        self._context = zmq.Context()
        self.requests = self._context.socket(zmq.DEALER)
        self.requests.setsockopt(zmq.IDENTITY, identity_for_rank(rank))
        self.requests.setsockopt(zmq.LINGER, 0)
        self.requests.connect(inputs)
        self.outputs = self._context.socket(zmq.PUSH)
        self.outputs.setsockopt(zmq.LINGER, 0)
        self.outputs.connect(outputs)

    def register(self, max_model_len: int = 4096,
                 tasks: tuple[str, ...] | None = ("generate",)) -> None:
        """Register, then answer the client's ``get_supported_tasks`` call with ``tasks`` (the
        client is ready only then); ``tasks`` None leaves that call to the test."""
        self.requests.send(self.registration(max_model_len))
        if tasks is not None:
            self.answer_supported_tasks(list(tasks))

    def registration(self, max_model_len: int = 4096) -> bytes:
        """The registration payload this engine sends (what a worker also shares in its run
        dir, ``engine.shared_registrations``)."""
        return protocol.encode_registration(EngineCoreReadyResponse(
            max_model_len=max_model_len, num_gpu_blocks=1024, block_size=16,
            dp_stats_address=None, dtype="bfloat16", vllm_version="0.32.0", world_size=1,
            data_parallel_size=1, tensor_parallel_size=1, pipeline_parallel_size=1,
            decode_context_parallel_size=1, data_parallel_rank=self.rank, max_num_seqs=64,
            max_num_batched_tokens=8192, instance_id="1", supports_lora=False, max_loras=0))

    def answer_supported_tasks(self, tasks: object) -> None:
        """Answer the client's next message, which must be the ``get_supported_tasks`` call."""
        kind, (_client, call_id, method, _args) = self.receive()
        assert kind == RequestType.UTILITY and method == SUPPORTED_TASKS_METHOD, (kind, method)
        self.outputs.send_multipart(protocol.encode_utility_reply(self.rank, call_id, tasks))

    def receive(self, timeout: float = 30.0) -> tuple[bytes, object]:
        """The next request the client sent: (type byte, decoded payload)."""
        assert wait_in_hub(lambda: self.requests.poll(0), timeout), "the client sent nothing"
        return protocol.decode_request(self.requests.recv_multipart())

    def send(self, outputs: EngineCoreOutputs) -> None:
        self.outputs.send_multipart(protocol.encode_outputs(outputs))

    def close(self) -> None:
        self.requests.close()
        self.outputs.close()
        self._context.term()
