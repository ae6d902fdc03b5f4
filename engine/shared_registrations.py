"""Engine registrations shared between a deployment's workers, as files in its run directory.

The engines register once per socket; a worker that restarts reads what its predecessor saved
(``registration-<rank>.msgpack``), so it knows the engines without a new handshake.

Runs on: the engine-I/O thread (save, on registration) and the HTTP hub (load, at start).
"""
from __future__ import annotations

import logging
import os
from typing import Any, Iterator

from engine import protocol

log = logging.getLogger("greenfront.engine")


def _path(directory: str, rank: int) -> str:
    return os.path.join(directory, f"registration-{rank}.msgpack")


def save(directory: str, rank: int, payload: bytes) -> None:
    """Write engine ``rank``'s registration atomically (a reader never sees half of it)."""
    path = _path(directory, rank)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(bytes(payload))
        os.replace(tmp, path)
    except OSError:
        log.warning("could not share engine %d's registration at %s", rank, path)


def load(directory: str, ranks: list[int]) -> Iterator[tuple[int, Any]]:
    """(rank, registration) of every rank whose registration was saved and reads."""
    for rank in ranks:
        path = _path(directory, rank)
        try:
            with open(path, "rb") as f:
                yield rank, protocol.decode_registration(f.read())
        except FileNotFoundError:
            continue
        except Exception:
            log.exception("ignoring unreadable %s", path)
