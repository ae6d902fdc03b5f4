"""UTILITY calls of the simulator: the EngineCore methods a frontend may invoke (docs/engine-protocol.md §3.5).

Owns the method table and the small state behind it (sleep flag, LoRA ids,
weight version). ``engine.sim.engine`` calls ``UtilityHandler.call`` for each
UTILITY request and turns the outcome into a reply.

Runs on: the simulator process.

Results are typed like a real engine's: ``get_supported_tasks`` -> ["generate"] (a pooling
engine's lists with --runner pooling);
``is_sleeping`` / ``is_scheduler_paused`` -> bool; ``reset_prefix_cache``,
``wake_up``, ``add_lora``, ``remove_lora``, ``pin_lora`` -> true; ``list_loras`` ->
list of ids; ``get_weight_version`` -> "default" (or what ``set_weight_version``
set); ``collective_rpc`` -> [nil]; ``reset_mm_cache``, ``reset_encoder_cache``,
``sleep``, ``release_kv_cache_memory``, ``pause_scheduler``, ``resume_scheduler``,
``profile``, ``execute_dummy_batch`` -> nil. ``pause_generation`` exists only when
--vllm-version is 0.33 or later: it pauses as ``pause_scheduler`` and, for modes "abort" and
"wait", answers new ADDs at once with a retryable ERROR (``engine_paused``) until resumed, as
0.33 engines do. Unknown methods fail with vLLM's message.

Pause modes: "abort" (default) ends every request with finish_reason ABORT
outputs, then pauses; "keep" freezes everything; "wait" lets admitted requests
finish and answers only then. ADDs received while paused wait for
``resume_scheduler``. Sleep only flips the flag: generation continues.
"""

from __future__ import annotations

from typing import Any, Callable

from engine.sim.config import SimConfig
from engine.sim.scheduler import ClientBatch, Scheduler

__all__ = ["DEFERRED", "UtilityFailure", "UtilityHandler"]

#: Returned by ``call`` when the reply must wait (``pause_scheduler(mode="wait")``).
DEFERRED = object()


class UtilityFailure(Exception):
    """A call that fails; the message becomes the reply's failure_message."""


class UtilityHandler:
    """Dispatches UTILITY method names to simulator behaviour."""

    def __init__(
        self,
        cfg: SimConfig,
        scheduler: Scheduler,
        emit: Callable[[dict[int, ClientBatch]], None],
    ) -> None:
        self._cfg = cfg
        self._sched = scheduler
        self._emit = emit
        self.sleeping = False
        self.loras: dict[int, str] = {}
        self.weight_version = "default"
        self._methods: dict[str, Callable[..., Any]] = {
            "get_supported_tasks": lambda: cfg.supported_tasks,
            "is_sleeping": lambda: self.sleeping,
            "is_scheduler_paused": lambda: self._sched.paused is not None,
            "reset_prefix_cache": lambda reset_running_requests=False, reset_connector=False: True,
            "reset_mm_cache": lambda: None,
            "reset_encoder_cache": lambda: None,
            "sleep": self._sleep,
            "wake_up": self._wake_up,
            "release_kv_cache_memory": lambda: None,
            "pause_scheduler": self._pause,
            "resume_scheduler": self._resume,
            "profile": lambda *args: None,
            "add_lora": self._add_lora,
            "remove_lora": self._remove_lora,
            "pin_lora": lambda lora_id: True,
            "list_loras": lambda: sorted(self.loras),
            "get_weight_version": lambda: self.weight_version,
            "set_weight_version": self._set_weight_version,
            "collective_rpc": lambda method, timeout=None, args=(), kwargs=None: [None],
            "execute_dummy_batch": lambda *args: None,
        }
        if cfg.emits_033_outputs:
            self._methods["pause_generation"] = self._pause_generation

    def call(self, method: str, args: list, now: float) -> Any:
        """Run ``method(*args)``; returns the result or ``DEFERRED``; raises ``UtilityFailure``."""
        fn = self._methods.get(method)
        if fn is None:
            raise UtilityFailure(
                f"Call to {method} method failed: 'EngineCoreProc' object has no attribute '{method}'"
            )
        self._now = now
        try:
            return fn(*args)
        except UtilityFailure:
            raise
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            raise UtilityFailure(f"Call to {method} method failed: {exc}") from exc

    def _sleep(self, level: int = 1, mode: str = "abort") -> None:
        self.sleeping = True

    def _wake_up(self, tags: list[str] | None = None) -> bool:
        self.sleeping = False
        return True

    def _pause(self, mode: str = "abort", clear_cache: bool = True) -> Any:
        if mode not in ("abort", "wait", "keep"):
            raise ValueError(f"unknown pause mode {mode!r}")
        if mode == "abort":
            batches = self._sched.abort_all()
            if batches:
                self._emit(batches)
            self._sched.pause("keep")
            return None
        self._sched.pause(mode)
        if mode == "wait" and not self._sched.drained():
            return DEFERRED
        return None

    def _pause_generation(self, mode: str = "abort", clear_cache: bool = True) -> Any:
        result = self._pause(mode, clear_cache)
        self._sched.reject_new = mode != "keep"
        return result

    def _resume(self) -> None:
        self._sched.resume(self._now)

    def _add_lora(self, lora: Any) -> bool:
        # Wire form is the LoRARequest array; accept a map too.
        if isinstance(lora, dict):
            name, lora_id = lora["lora_name"], lora["lora_int_id"]
        else:
            name, lora_id = lora[0], lora[1]
        if not isinstance(lora_id, int) or lora_id < 1:
            raise ValueError(f"lora_int_id must be a positive integer, got {lora_id!r}")
        self.loras[lora_id] = str(name)
        return True

    def _remove_lora(self, lora_id: int) -> bool:
        self.loras.pop(lora_id, None)
        return True

    def _set_weight_version(self, version: str, *rest: Any) -> None:
        self.weight_version = str(version)
