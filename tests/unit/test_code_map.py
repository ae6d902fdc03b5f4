"""The code map of docs/architecture.md §6 names every top-level module and folder and every
module of the layered packages."""
from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYERED = ("engine", "runtime", "streaming", "middleware", "resources", "rpc")


def _map() -> str:
    """The text of docs/architecture.md §6, up to the next section."""
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        text = f.read()
    section = re.split(r"^## \d+\. ", text[text.index("## 6. Code map"):], flags=re.M)[1]
    start = section.index("| folder | owns |")
    return section[start:]


def test_the_code_map_names_the_tree():
    table = _map()
    missing = []
    for entry in sorted(os.listdir(ROOT)):
        path = os.path.join(ROOT, entry)
        if entry.startswith(".") or entry in ("models", "__pycache__"):
            continue
        if entry.endswith(".py") and f"`{entry}`" not in table:
            missing.append(entry)
        elif os.path.isdir(path) and os.path.exists(os.path.join(path, "__init__.py")) \
                and f"`{entry}/" not in table:
            missing.append(entry + "/")
    for package in LAYERED:
        for entry in sorted(os.listdir(os.path.join(ROOT, package))):
            if entry.startswith("_") or entry == "__pycache__":
                continue
            name = entry if entry.endswith(".py") else entry + "/"
            if f"`{name}`" not in table and f"`{package}/{name}`" not in table:
                missing.append(f"{package}/{name}")
    assert not missing, f"docs/architecture.md §6 does not name: {missing}"
