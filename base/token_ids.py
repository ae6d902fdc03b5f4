"""A prompt's token ids as one uint32 buffer: ``TokenIds``, from the tokenizer to the wire.

A 300k-character prompt is ~82k ids. As a Python list each id is an object, and every step that
touches the list holds the GIL for all of them (measured with ``py-spy --gil`` and thread CPU
time on an 82k-id prompt, 2-core VM): building the Encoding objects of ``encode_batch`` ~1.8 ms
per request, ``.ids`` 0.2-0.5 ms, msgspec encoding the ADD 0.9 ms, orjson of the ``/tokenize``
answer 1.0 ms, in pool threads whose GIL the HTTP hub waits for. ``TokenIds`` keeps the ids
as the tokenizer's native buffer (``fastokens.encode_batch_flat``: little-endian u32 bytes) in
a numpy array; the ADD gets their msgpack array from two vectorized numpy stores (0.14 ms), the
JSON answer gets them from orjson's numpy path (0.43 ms). It is a read-only ``Sequence[int]``,
so the rare paths that look at single ids or slices (truncation, echo, reasoning markers) work
unchanged; a slice is a plain list.

numpy is imported on first use (``load_numpy``; a worker does it as it starts): it adds 17 MB
of resident memory to a process, and the gunicorn master, the simulator and the handshake server
never build a ``TokenIds``.

Runs on: any thread (immutable once built).
"""
from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any, overload


@functools.cache
def load_numpy() -> Any:
    """numpy, imported once, and the two msgpack record types: one uint16 (``0xcd`` + 2 bytes
    big-endian) or one uint32 (``0xce`` + 4 bytes) per id."""
    import numpy  # noqa: PLC0415 (deferred: see the module docstring)

    return (numpy, numpy.dtype([("tag", "u1"), ("value", ">u2")]),
            numpy.dtype([("tag", "u1"), ("value", ">u4")]))


class TokenIds(Sequence[int]):
    """Immutable token ids backed by a 1-d ``uint32`` numpy array."""

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array

    @classmethod
    def from_u32_bytes(cls, data: bytes | memoryview) -> TokenIds:
        """From little-endian u32 bytes (``fastokens``' flat encoding); no copy."""
        return cls(load_numpy()[0].frombuffer(data, dtype="<u4"))

    @staticmethod
    def from_u64_offsets(data: bytes | memoryview) -> list[int]:
        """``fastokens``' flat-encoding offsets (little-endian u64) as ints."""
        return load_numpy()[0].frombuffer(data, dtype="<u8").tolist()

    def __len__(self) -> int:
        return len(self.array)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self.array[index].tolist()
        return int(self.array[index])

    def __iter__(self) -> Iterator[int]:
        return iter(self.array.tolist())

    def __reversed__(self) -> Iterator[int]:
        return iter(self.array[::-1].tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TokenIds):
            return bool(load_numpy()[0].array_equal(self.array, other.array))
        if isinstance(other, (list, tuple)):
            return self.array.tolist() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-sequence semantics, like list

    def tolist(self) -> list[int]:
        return self.array.tolist()

    def msgpack(self) -> bytes:
        """The ids as one msgpack array, every id in one width (uint16 when all fit, else
        uint32): any msgpack decoder reads the same ints; vLLM's engines decode them with
        msgspec as a ``list[int]``. msgspec's own encoding picks each int's smallest form,
        which takes a per-id pass in Python objects; this is two numpy stores."""
        n = len(self.array)
        if n < 16:
            head = bytes([0x90 | n])
        elif n < 1 << 16:
            head = b"\xdc" + n.to_bytes(2, "big")
        else:
            head = b"\xdd" + n.to_bytes(4, "big")
        if n == 0:
            return head
        numpy, uint16, uint32 = load_numpy()
        narrow = int(self.array.max()) < 1 << 16
        out = numpy.empty(n, uint16 if narrow else uint32)
        out["tag"] = 0xcd if narrow else 0xce
        out["value"] = self.array
        return head + out.tobytes()

    def __repr__(self) -> str:
        return f"TokenIds({len(self.array)} ids)"


def as_list(ids: Sequence[int]) -> list[int]:
    """A plain list of ``ids`` (a ``TokenIds`` converted once, a list as it is)."""
    if isinstance(ids, TokenIds):
        return ids.tolist()
    return ids if isinstance(ids, list) else list(ids)
