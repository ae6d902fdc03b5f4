"""gRPC message framing, grpc-timeout and grpc-message encoding (rpc/framing.py)."""
from __future__ import annotations

import pytest

from rpc.framing import MAX_RECEIVE_BYTES, encode_message, frame, parse_timeout, unframe
from rpc.status import Code, RpcError


def test_frame_round_trip():
    assert frame(b"abc") == b"\x00\x00\x00\x00\x03abc"
    assert unframe(frame(b"abc")) == b"abc"
    assert unframe(frame(b"")) == b""


@pytest.mark.parametrize("raw, code", [
    (b"\x00\x00\x00", Code.INTERNAL),                      # no whole prefix
    (b"\x01\x00\x00\x00\x01x", Code.INTERNAL),             # compressed without an encoding
    (b"\x00\x00\x00\x00\x05ab", Code.INTERNAL),            # truncated body
    (frame(b"a") + frame(b"b"), Code.UNIMPLEMENTED),       # a second request message
    (b"\x00" + (MAX_RECEIVE_BYTES + 1).to_bytes(4, "big"), Code.RESOURCE_EXHAUSTED),
])
def test_bad_frames(raw, code):
    with pytest.raises(RpcError) as info:
        unframe(raw)
    assert info.value.code == code


@pytest.mark.parametrize("raw, seconds", [
    ("1S", 1.0), ("250m", 0.25), ("2M", 120.0), ("1H", 3600.0), ("100u", 1e-4), ("5n", 5e-9),
    ("99999999S", 99999999.0),
])
def test_timeouts(raw, seconds):
    assert parse_timeout(raw) == pytest.approx(seconds)


@pytest.mark.parametrize("raw", ["", "S", "1", "1x", "123456789S", "-1S", "1.5S"])
def test_bad_timeouts(raw):
    with pytest.raises(RpcError) as info:
        parse_timeout(raw)
    assert info.value.code == Code.INTERNAL


def test_message_percent_encoding():
    assert encode_message("plain text: ok") == "plain text: ok"
    assert encode_message("100%") == "100%25"
    assert encode_message("é\n") == "%C3%A9%0A"
