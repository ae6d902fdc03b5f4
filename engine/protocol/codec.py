"""Frame building and parsing for the engine-core ZMQ links: the one place bytes are made.

Frontend side: ``encode_add`` / ``encode_abort`` / ``encode_utility`` build the
ROUTER multipart ``[identity, type, payload]``; ``decode_outputs`` parses one
PULL message (one decode per engine step: the hot path); ``decode_registration``
parses the ready map. Engine side (the simulator): ``decode_request``,
``encode_outputs``, ``encode_utility_reply``, ``encode_registration``.

Runs on: any thread. The module-level msgspec Encoder/Decoder objects are
reused across calls; each call keeps its working state on the C stack and holds
the GIL, so sharing them between threads is safe.

Decoding failures raise ``ProtocolError`` (a ValueError). Pickle ext types
(1, 2), which only appear with VLLM_ALLOW_INSECURE_SERIALIZATION, are refused.
"""

from __future__ import annotations

from typing import Any, Sequence

import msgspec
from msgspec.msgpack import Ext

from engine.protocol.handshake import EngineCoreReadyResponse
from engine.protocol.ndarray import CUSTOM_TYPE_RAW_VIEW
from engine.protocol.outputs import EngineCoreOutputs, UtilityOutput
from engine.protocol.requests import EngineCoreRequest, RequestType
from base.token_ids import TokenIds

__all__ = [
    "ENGINE_CORE_DEAD",
    "ProtocolError",
    "decode_outputs",
    "decode_registration",
    "decode_request",
    "encode_abort",
    "encode_add",
    "encode_outputs",
    "encode_registration",
    "encode_utility",
    "encode_utility_reply",
    "is_engine_dead",
]

#: The single frame an engine pushes on every output socket before dying.
ENGINE_CORE_DEAD = b"ENGINE_CORE_DEAD"


class ProtocolError(ValueError):
    """A message that does not follow the engine-core wire protocol."""


def _ext_hook(code: int, data: memoryview) -> Any:
    if code == CUSTOM_TYPE_RAW_VIEW:
        # Copy: the memoryview is only valid during decoding.
        return Ext(code, bytes(data))
    if code in (1, 2):
        raise ProtocolError(
            f"refusing msgpack ext type {code} (pickle); the engine runs with "
            "VLLM_ALLOW_INSECURE_SERIALIZATION=1, which greenfront does not support"
        )
    raise ProtocolError(f"unknown msgpack ext type {code}")


def _enc_hook(obj: Any) -> Any:
    # A prompt's ids as one pre-encoded msgpack array: 0.14 ms for 82k ids against 0.9 ms for
    # msgspec over a list of ints, GIL held (token_ids.py).
    if isinstance(obj, TokenIds):
        return msgspec.Raw(obj.msgpack())
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_outputs_decoder = msgspec.msgpack.Decoder(EngineCoreOutputs, ext_hook=_ext_hook)
_registration_decoder = msgspec.msgpack.Decoder(EngineCoreReadyResponse)
_request_decoder = msgspec.msgpack.Decoder(EngineCoreRequest, ext_hook=_ext_hook)
_abort_decoder = msgspec.msgpack.Decoder(list[str])
# Exactly four elements, as the engine's input thread requires.
_utility_decoder = msgspec.msgpack.Decoder(tuple[int, int, str, list], ext_hook=_ext_hook)
_wave_decoder = msgspec.msgpack.Decoder(tuple[int, Any])


def _buffer(frame: Any) -> Any:
    # Accept bytes and zmq.Frame (copy=False receives) alike.
    if isinstance(frame, (bytes, bytearray, memoryview)):
        return frame
    buf = getattr(frame, "buffer", None)
    return frame if buf is None else buf


# ---------------------------------------------------------------- frontend side


def encode_add(identity: bytes, req: EngineCoreRequest) -> list[bytes]:
    """ADD frames for the input ROUTER: ``[identity, b"\\x00", payload]``."""
    return [identity, RequestType.ADD, _encoder.encode(req)]


def encode_abort(identity: bytes, request_ids: Sequence[str]) -> list[bytes]:
    """ABORT frames: the payload is a msgpack array of internal request ids."""
    return [identity, RequestType.ABORT, _encoder.encode(list(request_ids))]


def encode_utility(
    identity: bytes, client_index: int, call_id: int, method: str, args: Sequence[Any] = ()
) -> list[bytes]:
    """UTILITY frames: payload ``[client_index, call_id, method, args]``.

    Struct arguments (e.g. a ``LoRARequest``) are encoded in their wire form.
    """
    return [identity, RequestType.UTILITY, _encoder.encode((client_index, call_id, method, tuple(args)))]


def is_engine_dead(frames: Sequence[Any]) -> bool:
    """True for the single-frame ``ENGINE_CORE_DEAD`` sentinel."""
    if len(frames) != 1:
        return False
    buf = _buffer(frames[0])
    return len(buf) == len(ENGINE_CORE_DEAD) and bytes(buf) == ENGINE_CORE_DEAD


def decode_outputs(frames: Sequence[Any]) -> EngineCoreOutputs | None:
    """Decode one message from the output PULL socket.

    Args:
        frames: the multipart message (bytes or ``zmq.Frame``); frames[1:] are
            aux frames that logprob arrays may reference by index. Keep them
            alive until ``logprobs_lists_to_python`` has run.

    Returns:
        The decoded batch, or None for the ``ENGINE_CORE_DEAD`` sentinel.

    Raises:
        ProtocolError: undecodable or malformed payload, pickle ext types.
    """
    if not frames:
        raise ProtocolError("empty output message")
    payload = _buffer(frames[0])
    if len(frames) == 1 and len(payload) == len(ENGINE_CORE_DEAD) and bytes(payload) == ENGINE_CORE_DEAD:
        return None
    try:
        return _outputs_decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(f"undecodable EngineCoreOutputs: {exc}") from exc


def decode_registration(payload: Any) -> EngineCoreReadyResponse:
    """Decode the registration map an engine sends on the input socket."""
    try:
        return _registration_decoder.decode(_buffer(payload))
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(f"undecodable engine registration: {exc}") from exc


# ------------------------------------------------------------------ engine side


def encode_registration(resp: EngineCoreReadyResponse) -> bytes:
    """Registration payload (all 25 keys, spec order)."""
    return _encoder.encode(resp)


def decode_request(frames: Sequence[Any]) -> tuple[bytes, Any]:
    """Decode a request as the engine DEALER receives it: ``[type, payload, aux...]``.

    Returns:
        ``(type_byte, obj)`` where obj is an ``EngineCoreRequest`` (ADD), a
        ``list[str]`` (ABORT), ``(client_index, call_id, method, args)``
        (UTILITY) or ``(wave, exclude_engine_index)`` (START_DP_WAVE).

    Raises:
        ProtocolError: unknown type byte or undecodable payload (a real engine's
            input thread dies on these, docs/engine-protocol.md §3.1).
    """
    if len(frames) < 2:
        raise ProtocolError(f"request message has {len(frames)} frame(s), expected at least 2")
    type_byte = bytes(_buffer(frames[0]))
    payload = _buffer(frames[1])
    try:
        if type_byte == RequestType.ADD:
            return type_byte, _request_decoder.decode(payload)
        if type_byte == RequestType.ABORT:
            return type_byte, _abort_decoder.decode(payload)
        if type_byte == RequestType.UTILITY:
            return type_byte, _utility_decoder.decode(payload)
        if type_byte == RequestType.START_DP_WAVE:
            return type_byte, _wave_decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(f"undecodable request of type {type_byte.hex()}: {exc}") from exc
    raise ProtocolError(f"unknown request type byte {type_byte.hex()}")


def encode_outputs(outputs: EngineCoreOutputs, aux_frames: Sequence[bytes] | None = None) -> list[bytes]:
    """Output message frames: ``[payload, *aux_frames]``.

    ``aux_frames`` are the buffers ``ndarray.encode_ndarray`` collected for this
    message (their indexes were assigned when the arrays were built).
    """
    if aux_frames:
        return [_encoder.encode(outputs), *aux_frames]
    return [_encoder.encode(outputs)]


def encode_utility_reply(
    engine_index: int,
    call_id: int,
    result: Any = None,
    failure_message: str | None = None,
    timestamp: float = 0.0,
) -> list[bytes]:
    """A utility reply message: success ``[call_id, nil, [nil, result]]`` or failure ``[call_id, msg, nil]``."""
    if failure_message is None:
        utility = UtilityOutput(call_id, None, [None, result])
    else:
        utility = UtilityOutput(call_id, failure_message, None)
    return [_encoder.encode(EngineCoreOutputs(engine_index=engine_index, timestamp=timestamp, utility_output=utility))]
