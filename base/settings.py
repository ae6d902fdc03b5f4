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
from typing import Any, Callable, Iterable, Mapping

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


def gc_thresholds(raw: str) -> tuple[int, int, int]:
    """``gc.set_threshold``'s three numbers, comma-separated (``0,0,0`` as the first disables
    automatic collection)."""
    parts = tuple(int(p) for p in raw.split(","))
    if len(parts) != 3 or min(parts) < 0:
        raise ValueError("must be three non-negative integers, e.g. 20000,50,20")
    return parts  # type: ignore[return-value]


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


def _json(raw: str) -> object:
    """``raw`` parsed as JSON; a ValueError (the setting's message) when it is not JSON."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None


def json_object(raw: str) -> dict:
    value = _json(raw)
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    return value


def json_strings(raw: str) -> tuple[str, ...]:
    """A JSON list of strings (``--allowed-origins '["https://a"]'``)."""
    value = _json(raw)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a JSON list of strings")
    return tuple(value)


def lora_module_list(raw: str) -> tuple[tuple[str, str, str | None, bool], ...]:
    """A JSON list of vLLM's LoRAModulePath objects (``name``, ``path``, optional
    ``base_model_name`` and ``is_3d_lora_weight``), as (name, path, base, is_3d) tuples."""
    value = _json(raw)
    if not isinstance(value, list):
        raise ValueError("must be a JSON list of LoRA modules")
    modules = []
    for item in value:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]
                and isinstance(item.get("path"), str) and item["path"]
                and isinstance(item.get("base_model_name"), (str, type(None)))
                and isinstance(item.get("is_3d_lora_weight", False), bool)
                and set(item) <= {"name", "path", "base_model_name", "is_3d_lora_weight"}):
            raise ValueError(f"not a LoRA module (name, path, base_model_name, "
                             f"is_3d_lora_weight): {item!r}")
        modules.append((item["name"], item["path"], item.get("base_model_name"),
                        item.get("is_3d_lora_weight", False)))
    return tuple(modules)


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


TABLE_BEGIN = "<!-- settings table: generated from config.py by `python -m base.settings_page` -->"
TABLE_END = "<!-- end of settings table -->"


def settings_table(declarations: Iterable[Setting]) -> str:
    """The settings table of docs/settings.md: one row per declaration."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for decl in declarations:
        variable = f"`{decl.env[0]}`"
        if len(decl.env) > 1:
            variable += " (fallback " + ", ".join(f"`{e}`" for e in decl.env[1:]) + ")"
        rows.append(f"| {variable} | {decl.default_text()} | {decl.doc} |")
    return "\n".join(rows)


def with_table(text: str, table: str) -> str:
    """``text`` (docs/settings.md) with ``table`` between its settings-table markers."""
    head, begin, rest = text.partition(TABLE_BEGIN)
    _, end, tail = rest.partition(TABLE_END)
    if not begin or not end:
        raise ValueError("the page has no settings-table markers")
    return f"{head}{TABLE_BEGIN}\n{table}\n{TABLE_END}{tail}"
