"""The runtime LoRA adapters this deployment loaded: ``LoraRegistry``.

Behind ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``. The adapters (name → int id, path) are shared by every
gunicorn worker of the deployment through a small JSON file in the run dir (``loras.json``,
guarded by ``flock``), so that ids are unique across workers, any worker can unload what another
loaded, and a restarted worker still knows them. ``lora_registry(config)`` is how other modules
(``/v1/models``, the load/unload routes in ``resources/admin/lora.py``) reach it;
``adapter_lookup(config)`` is what request conversion resolves ``model`` names with.

Runs on: the HTTP hub (load/unload, from the routes). The registry's file work is short and never
yields while it holds the lock (greenlets of one process would otherwise deadlock on the same
``flock``). Reading (``lora_request``, ``adapters``) runs on request-pool threads too, once per
request that names a model other than a served one: it takes no lock at all (see ``_view``).
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from base import jsonio
from base.config import Config
from engine.protocol import LoRARequest
from base.errors import InvalidRequest, NotFound

log = logging.getLogger("greenfront.lora")

class InvalidUserInput(InvalidRequest):
    """400 with the error type vLLM's LoRA checks use."""
    type = "InvalidUserInput"


@dataclass(frozen=True)
class LoraAdapter:
    name: str
    int_id: int
    path: str
    load_inplace: bool = False
    is_3d_lora_weight: bool = False
    #: ``--lora-modules``' ``base_model_name``: ``/v1/models``' parent (None: the served name).
    base_model_name: str | None = None

    def request(self) -> list:
        """The LoRARequest wire array (docs/engine-protocol.md §3.6): name, id, path, base model, flags."""
        return [self.name, self.int_id, self.path, None, self.load_inplace,
                self.is_3d_lora_weight]

    def lora_request(self) -> LoRARequest:
        """The same fields as the ``EngineCoreRequest.lora_request`` struct (what vLLM's frontend
        puts into the ADDs of a request naming this adapter: the struct it gave ``add_lora``)."""
        return LoRARequest(*self.request())

    @classmethod
    def from_entry(cls, name: str, entry: dict) -> LoraAdapter:
        return cls(name, entry["id"], entry["path"], entry.get("load_inplace", False),
                   entry.get("is_3d_lora_weight", False), entry.get("base_model_name"))


class LoraRegistry:
    """The deployment's loaded adapters.

    State: ``{"next_id": n, "adapters": {name: entry}}`` where an entry holds ``id``, ``path``,
    the two flags, ``loaded`` (the engines have it) and ``busy`` (pid of the worker loading or
    unloading it right now; a dead pid's claim is void).

    Args:
        run_dir: the deployment's run dir; "" keeps the registry in this process only.
    """

    def __init__(self, run_dir: str) -> None:
        self._path = os.path.join(run_dir, "loras.json") if run_dir else ""
        self._memory: dict[str, Any] = {"next_id": 1, "adapters": {}}
        self._cache: _View | None = None

    # -- reading (any module, any thread) ---------------------------------------------------------
    def adapters(self) -> list[LoraAdapter]:
        """Loaded adapters, in id order."""
        return list(self._view().adapters.values())

    def models(self) -> list[dict[str, str | None]]:
        """``/v1/models`` fields of each adapter, as vLLM fills them: ``id`` is the adapter
        name, ``root`` its path, ``parent`` its base model when ``--lora-modules`` named one,
        else None (the caller puts the first served model name)."""
        return [{"id": a.name, "root": a.path, "parent": a.base_model_name}
                for a in self.adapters()]

    def lora_request(self, name: str) -> LoRARequest | None:
        """The ``lora_request`` of an ADD for a request whose ``model`` is ``name`` (one shared,
        never mutated struct per adapter and registry version), or None when no loaded adapter
        has that name (an adapter being loaded is not usable yet; one being unloaded still is)."""
        return self._view().requests.get(name)

    # -- load / unload (this module) ---------------------------------------------------------------
    def begin_load(self, name: str, path: str, load_inplace: bool, is_3d: bool,
                   base_model_name: str | None = None) -> tuple[LoraAdapter, dict | None]:
        """Claim ``name`` and pick its id; returns the adapter and the entry it replaces."""
        with self._transaction() as state:
            adapters = state["adapters"]
            previous = _live(adapters.get(name))
            if previous is not None and previous.get("busy"):
                raise InvalidUserInput(f"The lora adapter '{name}' is being loaded or unloaded "
                                       "by another request; retry shortly.")
            if previous is not None and previous.get("loaded") and not load_inplace:
                raise InvalidUserInput(
                    f"The lora adapter '{name}' has already been loaded. If you want to load "
                    "the adapter in place, set 'load_inplace' to True.")
            if previous is not None and previous.get("loaded"):
                # An in-place reload keeps the id (vLLM does); the old path is listed until
                # the engines took the new one.
                previous = dict(previous)
                int_id = previous["id"]
                adapters[name] = {**previous, "busy": os.getpid()}
            else:
                previous = None
                int_id = state["next_id"]
                state["next_id"] = int_id + 1
            adapter = LoraAdapter(name, int_id, path, load_inplace, is_3d, base_model_name)
            if previous is None:
                adapters[name] = {**_entry(adapter), "loaded": False, "busy": os.getpid()}
        return adapter, previous

    def end_load(self, adapter: LoraAdapter, previous: dict | None, ok: bool) -> None:
        with self._transaction() as state:
            adapters = state["adapters"]
            if ok:
                adapters[adapter.name] = {**_entry(adapter), "loaded": True, "busy": None}
            elif previous is not None:
                adapters[adapter.name] = {**previous, "busy": None}
            else:
                adapters.pop(adapter.name, None)

    def begin_unload(self, name: str) -> LoraAdapter:
        with self._transaction() as state:
            entry = _live(state["adapters"].get(name))
            if entry is None or not entry.get("loaded"):
                raise NotFound(f"The lora adapter '{name}' cannot be found.")
            if entry.get("busy"):
                raise InvalidUserInput(f"The lora adapter '{name}' is being loaded or unloaded "
                                       "by another request; retry shortly.")
            entry["busy"] = os.getpid()
            return LoraAdapter.from_entry(name, entry)

    def end_unload(self, adapter: LoraAdapter, ok: bool) -> None:
        with self._transaction() as state:
            if ok:
                state["adapters"].pop(adapter.name, None)
            elif adapter.name in state["adapters"]:
                state["adapters"][adapter.name]["busy"] = None

    # -- storage -----------------------------------------------------------------------------------
    def _view(self) -> _View:
        """The loaded adapters as of the registry file's current version, parsed once per version.

        Request-pool threads call this per request, so it must be cheap, thread-safe and never
        block or yield: the cached view is one immutable tuple, swapped by a single assignment
        (atomic under the GIL); there is no lock, and concurrent threads that both find the
        cache stale both re-read it (harmless). A hit costs one ``stat``.

        The cache key is the file's (inode, mtime, size); the writers never change the file in
        place (``os.replace`` of a fresh file). File times are only as fine as the kernel's
        clock tick, so a version read less than ``_RACY_SECONDS`` after it was written is not
        trusted (a later write in the same tick could have the same key; git's "racily clean"
        rule): until then every call re-reads the file.
        """
        if not self._path:
            return _View.parse(None, self._memory)
        cached = self._cache
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return _EMPTY
        if cached is not None and cached.key == _key(st):
            return cached
        started = time.time()
        try:
            with open(self._path, "rb") as f:
                key = _key(os.fstat(f.fileno()))
                data = f.read()
        except FileNotFoundError:
            return _EMPTY
        trusted = started - key[1] / 1e9 >= _RACY_SECONDS
        view = _View.parse(key if trusted else None, jsonio.loads(data))
        self._cache = view
        return view

    def _read(self) -> dict[str, Any]:
        """The whole state, read now (transactions: under the lock)."""
        if not self._path:
            return self._memory
        try:
            with open(self._path, "rb") as f:
                return jsonio.loads(f.read())
        except FileNotFoundError:
            return {"next_id": 1, "adapters": {}}

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[dict[str, Any]]:
        """Read-modify-write under an exclusive lock; written back only if no exception."""
        if not self._path:
            yield self._memory
            return
        fd = os.open(self._path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            state = self._read()
            yield state
            tmp = f"{self._path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(jsonio.dumps(state))
            os.replace(tmp, self._path)  # readers without the lock see old or new, never half
            self._cache = None  # this process sees its own change at once
        finally:
            os.close(fd)  # also releases the lock


#: How long after its mtime a registry version is re-read instead of trusted (see ``_view``).
_RACY_SECONDS = 2.0


def _key(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class _View(NamedTuple):
    """One parsed registry version: the loaded adapters (id order) and their LoRARequests."""

    key: tuple[int, int, int] | None  # None: never matches, re-read next time
    adapters: dict[str, LoraAdapter]
    requests: dict[str, LoRARequest]

    @classmethod
    def parse(cls, key: tuple[int, int, int] | None, state: dict[str, Any]) -> _View:
        loaded = [LoraAdapter.from_entry(n, e) for n, e in list(state["adapters"].items())
                  if e.get("loaded")]
        loaded.sort(key=lambda a: a.int_id)
        return cls(key, {a.name: a for a in loaded},
                   {a.name: a.lora_request() for a in loaded})


_EMPTY = _View(None, {}, {})


def _entry(adapter: LoraAdapter) -> dict[str, Any]:
    return {"id": adapter.int_id, "path": adapter.path, "load_inplace": adapter.load_inplace,
            "is_3d_lora_weight": adapter.is_3d_lora_weight,
            "base_model_name": adapter.base_model_name}


def _live(entry: dict | None) -> dict | None:
    """The entry with a dead worker's claim dropped (that worker's load never finished:
    a never-loaded entry is forgotten, a loaded one is released)."""
    if entry is None or not entry.get("busy") or _pid_alive(entry["busy"]):
        return entry
    if not entry.get("loaded"):
        return None
    entry["busy"] = None
    return entry


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@functools.cache
def _registry(run_dir: str) -> LoraRegistry:
    return LoraRegistry(run_dir)


def lora_registry(config: Config) -> LoraRegistry:
    """The deployment's registry (one object per run dir and process)."""
    return _registry(config.run_dir)


def adapter_lookup(config: Config) -> LoraRegistry | None:
    """What request conversion resolves adapter names with (``ServingContext.adapters``): the
    registry when adapters are served (runtime updating or ``--lora-modules``), else None."""
    return lora_registry(config) if uses_adapters(config) else None


def uses_adapters(config: Config) -> bool:
    """Whether this deployment serves LoRA adapters (loaded at run time or at start-up)."""
    return config.allow_runtime_lora_updating or bool(config.lora_modules)
