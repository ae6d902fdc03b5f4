"""How a setting is declared, parsed and read (the machinery under ``config.py``).

``Setting`` is one setting's declaration; ``setting(...)`` makes a ``Config`` field carrying one.
The parsers turn an environment value into a typed one and raise ``ValueError`` for text that is
not a valid value (``Setting.read`` then logs it and keeps the default).

Runs on: import time, wherever ``config`` is imported.
"""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping

log = logging.getLogger("greenfront.config")

#: PERF: more pool threads than cores doubles the /health tail (docs/architecture.md §5.3).
REQUEST_THREADS_CAP = 32


# -- parsers: str -> value, ValueError when the text is not a valid value ----------------------
def positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError("must be >= 1")
    return value


def non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def non_negative_float(raw: str) -> float:
    value = float(raw)
    if not value >= 0:
        raise ValueError("must be >= 0")
    return value


def positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError("must be > 0")
    return value


def niceness(raw: str) -> int:
    value = int(raw)
    if not 0 <= value <= 19:
        raise ValueError("must be a niceness from 0 to 19")
    return value


def boolean(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be 0/1/true/false")


def choice(*allowed: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return raw
    return parse


def names(raw: str) -> tuple[str, ...]:
    listed = tuple(n.strip() for n in raw.split(",") if n.strip())
    if not listed:
        raise ValueError("empty list")
    return listed


def capped_threads(raw: str) -> int:
    return min(REQUEST_THREADS_CAP, positive_int(raw))


def generation_config(raw: str) -> bool:
    """``auto``: the model's generation_config.json gives sampling defaults; ``vllm``: not."""
    return choice("auto", "vllm")(raw) == "auto"


def fingerprint(raw: str) -> str | None:
    return raw or None


def json_object(raw: str) -> dict:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    return value


def json_strings(raw: str) -> tuple[str, ...]:
    """A JSON list of strings (``--allowed-origins '["https://a"]'``)."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a JSON list of strings")
    return tuple(value)


# -- declarations --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    """One setting's declaration (kept in the metadata of its ``Config`` field)."""

    env: tuple[str, ...]
    parse: Callable[[str], Any]
    default: Any
    doc: str
    shown: str | None = None
    secret: bool = False
    empty_is_value: bool = False

    def read(self, env: Mapping[str, str]) -> Any:
        """The first environment name that is set, parsed; the default when none is set or the
        value does not parse (logged)."""
        for name in self.env:
            raw = env.get(name)
            if raw is None or (raw == "" and not self.empty_is_value):
                continue
            try:
                return self.parse(raw)
            except ValueError as exc:
                log.warning("ignoring %s=%r (%s); using %r", name, raw, exc, self.default)
                return self.default
        return self.default

    def default_text(self) -> str:
        if self.shown is not None:
            return self.shown
        value = self.default
        if value is None or value == "" or value == ():
            return "none"
        if isinstance(value, bool):
            return f"`{int(value)}`"
        return f"`{value}`"


def setting(env: tuple[str, ...], parse: Callable[[str], Any], default: Any, doc: str, *,
            shown: str | None = None, secret: bool = False, empty_is_value: bool = False) -> Any:
    """A ``Config`` field declared as a setting (see the module docstring)."""
    decl = Setting(env, parse, default, doc, shown, secret, empty_is_value)
    return dataclasses.field(default=default, metadata={"setting": decl})
