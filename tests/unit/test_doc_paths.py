"""Every repository path the README and the docs name exists: paths under a top-level folder of
the repository (``engine/client.py``, ``docs/api.md``), top-level files, and relative links."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Made by ``make`` or by a run, not tracked: named paths under them need not exist in a checkout.
GENERATED = ("models/", "bench/results/", ".venv/")
#: Media types that look like paths under the ``text/`` package.
NOT_PATHS = {"text/event-stream", "text/plain", "text/html"}
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def _pages() -> list[str]:
    return sorted(name for name in _tracked()
                  if name == "README.md" or name.startswith("docs/") and name.endswith(".md")
                  or name in ("bench/README.md", "bench/RESULTS.md"))


def _path_pattern() -> re.Pattern:
    """Tokens that start with a tracked top-level folder, or are a tracked top-level file."""
    tops = {name.split("/", 1)[0] for name in _tracked()}
    folders = sorted(t for t in tops if os.path.isdir(os.path.join(ROOT, t)))
    files = sorted(t for t in tops if os.path.isfile(os.path.join(ROOT, t)))
    alternatives = "|".join([re.escape(f) + r"/[\w./<>{}*…-]*" for f in folders]
                            + [re.escape(f) + r"(?![\w/-])" for f in files])
    return re.compile(rf"(?<![\w./$<-])(?:{alternatives})")


def _named_paths(text: str, pattern: re.Pattern) -> set[str]:
    found = set()
    for match in pattern.finditer(text):
        path = match.group(0).rstrip(".,;:")
        if any(c in path for c in "<{*…") or path in NOT_PATHS:
            continue
        found.add(path)
    return found


def _exists(path: str) -> bool:
    """The path, or a module's attribute written as ``base/handoff.HubInbox``."""
    if os.path.exists(os.path.join(ROOT, path)):
        return True
    module, dot, _ = path.rpartition(".")
    return bool(dot) and "/" in module and os.path.isfile(os.path.join(ROOT, module + ".py"))


@pytest.mark.parametrize("page", _pages())
def test_named_paths_exist(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        text = f.read()
    missing = [p for p in sorted(_named_paths(text, _path_pattern()))
               if not p.startswith(GENERATED) and not _exists(p)]
    base = os.path.dirname(os.path.join(ROOT, page))
    missing += [f"link {target}" for target in LINK.findall(text)
                if "://" not in target and not os.path.exists(os.path.join(base, target))]
    assert not missing, f"{page} names paths that do not exist: {missing}"


def test_the_check_sees_paths():
    pattern = _path_pattern()
    assert _named_paths("`engine/client.py`, app.py and docs/api.md §3.", pattern) == {
        "engine/client.py", "app.py", "docs/api.md"}
    assert _named_paths("`text/event-stream`, `resources/<endpoint>/types.py`", pattern) == set()
