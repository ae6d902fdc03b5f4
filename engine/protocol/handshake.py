"""Startup messages: HELLO / INIT / READY and the engine registration (docs/engine-protocol.md §2).

Owns the msgspec shapes and encode/decode helpers for the handshake ROUTER
conversation (HELLO, INIT = EngineHandshakeMetadata, READY) and for the
``EngineCoreReadyResponse`` registration map an engine sends on each input
socket. Used by the simulator (engine side), by greenfront's engine launcher
when it owns the handshake, and by the registration wait in the engine client.

Runs on: any thread (pure functions; module-level encoder/decoders).
"""

from __future__ import annotations

import msgspec

__all__ = [
    "EngineCoreReadyResponse",
    "EngineHandshakeMetadata",
    "EngineZmqAddresses",
    "HandshakeStatus",
    "decode_handshake_status",
    "decode_init",
    "encode_hello",
    "encode_init",
    "encode_ready",
    "identity_for_rank",
    "rank_of_identity",
]


def identity_for_rank(rank: int) -> bytes:
    """ZMQ identity of engine ``rank``: the DP rank as 2-byte little-endian."""
    return rank.to_bytes(2, "little")


def rank_of_identity(identity: bytes) -> int:
    """Inverse of ``identity_for_rank``."""
    return int.from_bytes(identity, "little")


class HandshakeStatus(msgspec.Struct, omit_defaults=True, gc=False):
    """HELLO or READY map an engine sends on the handshake socket.

    ``parallel_config_hash`` is only present when DP > 1; 0.33's extra READY keys
    (elastic EP) are ignored when decoding.
    """

    status: str
    local: bool
    headless: bool
    parallel_config_hash: str | None = None


class EngineZmqAddresses(msgspec.Struct, gc=False):
    """INIT ``addresses``: the engine connects a DEALER to every input, a PUSH to every output."""

    inputs: list[str]
    outputs: list[str]
    coordinator_input: str | None = None
    coordinator_output: str | None = None
    frontend_stats_publish_address: str | None = None


class EngineHandshakeMetadata(msgspec.Struct, gc=False):
    """The INIT map the handshake owner sends after HELLO."""

    addresses: EngineZmqAddresses
    parallel_config: dict = msgspec.field(default_factory=dict)


class EngineCoreReadyResponse(msgspec.Struct, gc=False):
    """Registration map an engine sends on each input socket (docs/engine-protocol.md §2.4), 0.32's 25 keys.

    Encoded with every key present, in this order (vllm-rs requires the first
    17 and rejects an empty payload). Decoding requires those 17, defaults the
    rest and ignores unknown keys (0.33 adds three).
    """

    max_model_len: int
    num_gpu_blocks: int
    block_size: int
    dp_stats_address: str | None
    dtype: str
    vllm_version: str
    world_size: int
    data_parallel_size: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    decode_context_parallel_size: int
    data_parallel_rank: int
    max_num_seqs: int
    max_num_batched_tokens: int
    instance_id: str
    supports_lora: bool
    max_loras: int
    mamba_block_size: int | None = None
    kv_cache_size_tokens: int | None = None
    kv_cache_max_concurrency: float | None = None
    kv_events_config: dict | None = None
    weight_transfer_backend: str | None = None
    enable_sleep_mode: bool = False
    supports_draft_weight_updates: bool = False
    effective_attention_block_size: int | None = None


_encoder = msgspec.msgpack.Encoder()
_status_decoder = msgspec.msgpack.Decoder(HandshakeStatus)
_init_decoder = msgspec.msgpack.Decoder(EngineHandshakeMetadata)


def encode_hello(local: bool = False, headless: bool = True) -> bytes:
    """HELLO payload. A separately started headless engine says local=false, headless=true."""
    return _encoder.encode(HandshakeStatus("HELLO", local, headless))


def encode_ready(local: bool = False, headless: bool = True, parallel_config_hash: str | None = None) -> bytes:
    """READY payload, sent on the handshake socket right after the registrations."""
    return _encoder.encode(HandshakeStatus("READY", local, headless, parallel_config_hash))


def decode_handshake_status(payload: bytes) -> HandshakeStatus:
    """Decode a HELLO/READY map (raises ``msgspec.DecodeError``/``ValidationError``)."""
    return _status_decoder.decode(payload)


def encode_init(addresses: EngineZmqAddresses, parallel_config: dict | None = None) -> bytes:
    """INIT payload the handshake owner sends to the engine after HELLO."""
    return _encoder.encode(EngineHandshakeMetadata(addresses, {} if parallel_config is None else parallel_config))


def decode_init(payload: bytes) -> EngineHandshakeMetadata:
    """Decode an INIT map (raises ``msgspec.DecodeError``/``ValidationError``)."""
    return _init_decoder.decode(payload)
