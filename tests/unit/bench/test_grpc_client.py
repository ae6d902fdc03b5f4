"""``bench.grpc_client`` and ``bench.grpc_load``'s accounting on recorded bytes: what a real
greenfront sent for four ``GenerateStream`` calls of 8 tokens
(``tests/unit/data/grpc_stream_bytes.json``, made by ``gen_grpc_stream_bytes.py``), replayed
in the reads it came in and cut into 7-byte pieces (frames and messages split anywhere)."""
from __future__ import annotations

import json
import socket
from pathlib import Path
from time import monotonic

import hpack
import pytest

from bench import grpc_client as gc
from bench.client import Loop
from bench.grpc_load import PATH, _GrpcStreamRun
from rpc.proto import inference_pb2 as pb

RECORDED = json.loads((Path(__file__).parent.parent / "data" / "grpc_stream_bytes.json")
                      .read_text())
READS = [bytes.fromhex(r) for r in RECORDED["reads"]]
WHOLE = b"".join(READS)
SPLITS = {"as read": READS, "7-byte pieces": [WHOLE[i:i + 7] for i in range(0, len(WHOLE), 7)]}


@pytest.fixture
def server():
    """A listening socket to connect to: the recorded bytes stand in for its answers."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


class Recorder(gc.Call):
    def __init__(self) -> None:
        self.messages: list[pb.GenerateResponse] = []
        self.ends: list[tuple[int, str]] = []
        self.errors: list[str] = []

    def on_message(self, payload: bytes, t: float) -> None:
        self.messages.append(pb.GenerateResponse.FromString(payload))

    def on_end(self, status: int, message: str, t: float) -> None:
        self.ends.append((status, message))

    def on_error(self, reason: str, t: float) -> None:
        self.errors.append(reason)


def _connection(port: int) -> tuple[Loop, gc.H2Connection]:
    loop = Loop()
    return loop, gc.H2Connection(loop, "127.0.0.1", port, gc.request_headers("h:1", PATH))


def test_a_call_is_one_headers_and_one_data_frame_after_the_preface(server):
    loop, conn = _connection(server)
    request = pb.GenerateRequest(text="hi", stopping=pb.StoppingCriteria(max_new_tokens=3))
    conn.start(gc.grpc_message(request.SerializeToString()), Recorder())
    out = bytes(conn.out)
    assert out.startswith(gc.PREFACE)
    frames = list(gc.split_frames(out[len(gc.PREFACE):]))
    assert [(f[0], f[1], f[2]) for f in frames] == [
        (gc.SETTINGS, 0, 0), (gc.WINDOW_UPDATE, 0, 0), (gc.HEADERS, gc.END_HEADERS, 1),
        (gc.DATA, gc.END_STREAM, 1)]
    assert dict(hpack.Decoder().decode(frames[2][3])) == {
        ":method": "POST", ":scheme": "http", ":path": PATH, ":authority": "h:1",
        "content-type": "application/grpc", "te": "trailers", "user-agent": "greenfront-bench"}
    body = frames[3][3]
    assert body[0] == 0 and int.from_bytes(body[1:5], "big") == len(body) - 5
    assert pb.GenerateRequest.FromString(body[5:]) == request
    loop.close()


@pytest.mark.parametrize("split", SPLITS)
def test_recorded_streams_give_every_message_and_the_status(server, split):
    loop, conn = _connection(server)
    calls = [Recorder() for _ in range(RECORDED["streams"])]
    for call in calls:
        conn.start(gc.grpc_message(b""), call)
    conn.out.clear()
    for piece in SPLITS[split]:
        conn.feed(piece, 0.0)
    for call in calls:
        assert call.errors == [] and call.ends == [(0, "")]
        first, *rest = call.messages
        assert first.HasField("prompt_info") and not first.HasField("outputs")
        assert sum(m.outputs.num_tokens for m in rest) == RECORDED["max_new_tokens"]
        assert rest[-1].outputs.finish_info.finish_reason == pb.FinishInfo.LENGTH
    assert conn.streams == {}
    # The server's SETTINGS are acknowledged.
    assert (gc.SETTINGS, gc.ACK, 0, b"") in list(gc.split_frames(bytes(conn.out)))
    loop.close()


@pytest.mark.parametrize("split", SPLITS)
def test_the_load_generator_counts_tokens_chunks_and_first_tokens(server, split):
    now = monotonic()
    run = _GrpcStreamRun({"host": "127.0.0.1", "port": server, "model": "tiny", "seed": 0,
                          "t_begin": now, "t0": now, "t1": now + 60, "concurrency": 4,
                          "ramp_s": 0.0, "min_tokens": 8, "max_tokens": 8, "connections": 1})
    for _ in range(4):
        run.start(None, now)
    (conn,) = run.conns
    messages = sum(1 for kind, _, sid, payload in gc.split_frames(WHOLE) if kind == gc.DATA)
    for piece in SPLITS[split]:
        conn.feed(piece, now + 1)
    assert run.errors == {} and run.completed == 4
    assert run.tokens_done == run.tokens_in_window == run.seen_tokens == 32
    assert len(run.ttft) == 4
    # Every DATA frame held one message; the four prompt_info messages carry no token.
    assert run.events_done == run.events_in_window == messages - 4
    assert run.sent == 8  # each finished slot started its next call at once
    run.loop.close()


def test_calls_wait_for_the_servers_stream_limit_and_a_reset_frees_a_place(server):
    loop, conn = _connection(server)
    conn.feed(gc.frame(gc.SETTINGS, 0, 0, (3).to_bytes(2, "big") + (1).to_bytes(4, "big")), 0.0)
    first, second = Recorder(), Recorder()
    conn.start(gc.grpc_message(b""), first)
    conn.start(gc.grpc_message(b""), second)
    assert list(conn.streams) == [1] and len(conn.pending) == 1
    conn.feed(gc.frame(gc.RST_STREAM, 0, 1, (8).to_bytes(4, "big")), 0.0)
    assert first.errors == ["stream reset (HTTP/2 error 8)"]
    assert list(conn.streams) == [3] and not conn.pending
    loop.close()
