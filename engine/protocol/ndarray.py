"""The ``[dtype, shape, data]`` array triple of the engine-core wire (docs/engine-protocol.md §5.3), without numpy.

Owns conversion between that triple and plain (nested) Python lists. ``data`` is
either an inline msgpack ext-3 payload (``msgspec.msgpack.Ext``), raw bytes, or
an ``int`` k naming ZMQ frame k of the same multipart message (an "aux frame").
Used by ``outputs.logprobs_lists_to_python`` on the frontend side and by the
simulator to build logprob arrays.

Runs on: any thread (pure functions).
"""

from __future__ import annotations

import struct
import sys
from array import array
from typing import Any, Sequence

from msgspec.msgpack import Ext

__all__ = [
    "CUSTOM_TYPE_RAW_VIEW",
    "ZERO_COPY_THRESHOLD",
    "NdarrayError",
    "encode_ndarray",
    "ndarray_to_list",
]

#: msgpack ext code vLLM uses for raw little-endian array bytes.
CUSTOM_TYPE_RAW_VIEW = 3
#: vLLM's default VLLM_MSGPACK_ZERO_COPY_THRESHOLD: arrays this big or bigger
#: travel as separate ZMQ frames instead of inline ext-3 bytes.
ZERO_COPY_THRESHOLD = 256

# dtype spelling (numpy ``dtype.str`` or torch name) -> array/memoryview typecode.
# Both spellings occur in real traffic (numpy for LogprobsLists, torch for
# LogprobsTensors), so both map to the same code.
_TYPECODES: dict[str, str] = {
    "<i4": "i", "int32": "i",
    "<i8": "q", "int64": "q",
    "<f4": "f", "float32": "f",
    "<f8": "d", "float64": "d",
    "<i2": "h", "int16": "h",
    "|i1": "b", "int8": "b",
    "|u1": "B", "uint8": "B",
    "|b1": "?", "bool": "?",
}
_HALF_DTYPES = ("<f2", "float16")
_BF16_DTYPES = ("bfloat16",)

_LITTLE_ENDIAN_HOST = sys.byteorder == "little"


class NdarrayError(ValueError):
    """An array triple that cannot be turned into Python values."""


def _frame_buffer(frame: Any) -> Any:
    # zmq.Frame (copy=False receives) exposes its bytes through .buffer.
    if isinstance(frame, (bytes, bytearray, memoryview)):
        return frame
    buf = getattr(frame, "buffer", None)
    return frame if buf is None else buf


def _data_bytes(data: Any, frames: Sequence[Any] | None) -> Any:
    if isinstance(data, Ext):
        if data.code != CUSTOM_TYPE_RAW_VIEW:
            raise NdarrayError(f"unexpected msgpack ext type {data.code} in array data")
        return data.data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data
    if isinstance(data, int) and not isinstance(data, bool):
        if frames is None or not 0 < data < len(frames):
            have = 0 if frames is None else len(frames)
            raise NdarrayError(f"array data refers to aux frame {data} but the message has {have} frames")
        return _frame_buffer(frames[data])
    if isinstance(data, dict):
        raise NdarrayError("out-of-band (shared-memory) tensors are not supported")
    raise NdarrayError(f"unsupported array data of type {type(data).__name__}")


def _flat_values(dtype: str, buf: Any) -> list:
    code = _TYPECODES.get(dtype)
    if code is not None:
        if _LITTLE_ENDIAN_HOST:
            mv = memoryview(buf)
            if mv.format != "B" or mv.ndim != 1:
                mv = mv.cast("B")
            if len(mv) % struct.calcsize(code):
                raise NdarrayError(f"{len(mv)} bytes is not a whole number of {dtype} items")
            return mv.cast(code).tolist()
        arr = array(code, bytes(buf))
        arr.byteswap()
        return arr.tolist()
    raw = bytes(buf)
    if dtype in _HALF_DTYPES:
        if len(raw) % 2:
            raise NdarrayError(f"{len(raw)} bytes is not a whole number of {dtype} items")
        return list(struct.unpack(f"<{len(raw) // 2}e", raw))
    if dtype in _BF16_DTYPES:
        if len(raw) % 2:
            raise NdarrayError(f"{len(raw)} bytes is not a whole number of {dtype} items")
        # bfloat16 is the top half of a float32: widen and reinterpret.
        halves = struct.unpack(f"<{len(raw) // 2}H", raw)
        return list(struct.unpack(f"<{len(halves)}f", struct.pack(f"<{len(halves)}I", *(h << 16 for h in halves))))
    raise NdarrayError(f"unsupported array dtype {dtype!r}")


def _reshape(flat: list, shape: Sequence[int]) -> list:
    if len(shape) <= 1:
        return flat
    if len(shape) == 2:
        cols = shape[1]
        return [flat[i : i + cols] for i in range(0, shape[0] * cols, cols)] if cols else [[] for _ in range(shape[0])]
    inner = 1
    for dim in shape[1:]:
        inner *= dim
    return [_reshape(flat[i * inner : (i + 1) * inner], shape[1:]) for i in range(shape[0])]


def ndarray_to_list(triple: Sequence[Any], frames: Sequence[Any] | None = None) -> list:
    """Decode a ``[dtype, shape, data]`` triple into a nested Python list.

    Args:
        triple: the wire value (as decoded by ``codec``: ext 3 arrives as ``Ext``).
        frames: the multipart message the triple came from; needed when ``data``
            is an aux-frame index.

    Returns:
        A list nested ``len(shape)`` deep (a flat list for 1-D; a scalar array
        of shape ``[]`` gives a one-element list).

    Raises:
        NdarrayError: unknown dtype, bad frame index, size/shape mismatch.
    """
    if not isinstance(triple, (list, tuple)) or len(triple) != 3:
        raise NdarrayError("array value must be a [dtype, shape, data] triple")
    dtype, shape, data = triple
    if not isinstance(dtype, str) or not isinstance(shape, (list, tuple)):
        raise NdarrayError("array triple has a malformed dtype or shape")
    flat = _flat_values(dtype, _data_bytes(data, frames))
    count = 1
    for dim in shape:
        count *= dim
    if count != len(flat):
        raise NdarrayError(f"array of shape {list(shape)} needs {count} items, data has {len(flat)}")
    return _reshape(flat, shape)


def encode_ndarray(
    values: Sequence[Any],
    dtype: str,
    shape: Sequence[int] | None = None,
    aux_frames: list[bytes] | None = None,
) -> list:
    """Build the wire triple for ``values`` (the reverse of ``ndarray_to_list``).

    Args:
        values: flat values when ``shape`` is given, else a 1-D or 2-D nested list
            whose shape is inferred.
        dtype: one of the numpy/torch spellings with a fixed-width typecode
            (``"<i4"``, ``"int32"``, ``"<f4"``, ``"float32"``, ``"<i8"``, ...).
        aux_frames: when given, arrays of ``ZERO_COPY_THRESHOLD`` bytes or more are
            appended to it and referenced by frame index (1 + position), exactly
            as vLLM does; send them after the payload frame. When ``None`` the
            bytes always go inline as ext 3.

    Returns:
        ``[dtype, shape, Ext(3, bytes) | frame_index]``, ready for msgspec.
    """
    code = _TYPECODES.get(dtype)
    if code is None:
        raise NdarrayError(f"cannot encode dtype {dtype!r}")
    if shape is None:
        if values and isinstance(values[0], (list, tuple)):
            shape = [len(values), len(values[0])]
            flat: Sequence[Any] = [v for row in values for v in row]
            if len(flat) != shape[0] * shape[1]:
                raise NdarrayError("ragged nested list cannot be encoded as an array")
        else:
            shape = [len(values)]
            flat = values
    else:
        flat = values
    arr = array(code, flat)
    if not _LITTLE_ENDIAN_HOST:
        arr.byteswap()
    raw = arr.tobytes()
    if aux_frames is not None and len(raw) >= ZERO_COPY_THRESHOLD:
        aux_frames.append(raw)
        return [dtype, list(shape), len(aux_frames)]
    return [dtype, list(shape), Ext(CUSTOM_TYPE_RAW_VIEW, raw)]
