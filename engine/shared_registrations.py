"""Engine registrations shared between the worker processes of one deployment.

An engine registers once per connection, so a worker that restarts would never hear its
engines' ready messages again: each worker writes every registration it receives into the
deployment's run directory (``registration-<rank>.msgpack``, replaced atomically), and a
starting worker reads the ones already there.

Runs on: the engine-I/O thread (``save``) and the HTTP hub at client start (``load``).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from typing import Any

from engine import protocol

log = logging.getLogger("greenfront.engine")


def _path(directory: str, rank: int) -> str:
    return os.path.join(directory, f"registration-{rank}.msgpack")


def save(directory: str, rank: int, payload: bytes) -> None:
    """Share engine ``rank``'s registration (nothing when ``directory`` is "")."""
    if not directory:
        return
    path = _path(directory, rank)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(bytes(payload))
        os.replace(tmp, path)
    except OSError:
        log.warning("could not share engine %d's registration at %s", rank, path)


def load(directory: str, ranks: Iterable[int]) -> Iterator[tuple[int, Any]]:
    """(rank, registration) of every shared registration of ``ranks`` (unreadable ones logged
    and skipped)."""
    if not directory:
        return
    for rank in ranks:
        path = _path(directory, rank)
        try:
            with open(path, "rb") as f:
                registration = protocol.decode_registration(f.read())
        except FileNotFoundError:
            continue
        except Exception:
            log.exception("ignoring unreadable %s", path)
            continue
        yield rank, registration
