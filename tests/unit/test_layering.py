"""The layering contract (.importlinter, docs/architecture.md "Layers") holds, and the base
modules at the top level import nothing of the project above them."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The base: modules everything may import and which import only each other.
BASE = ("config", "settings", "host", "errors", "jsonio", "handoff", "token_ids")
PROJECT = ("engine", "text", "runtime", "streaming", "resources", "middleware", "launch", "app",
           "bench", "tests", *BASE)


def _imported(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_import_linter_contracts_are_kept():
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    run = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_base_modules_import_only_the_base():
    for name in BASE:
        project = _imported(os.path.join(ROOT, name + ".py")) & set(PROJECT)
        assert project <= set(BASE), (name, project - set(BASE))
