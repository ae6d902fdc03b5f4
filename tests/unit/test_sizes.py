"""Small modules, short functions: no tracked Python file over 450 lines, no function over 60.

Nothing is exempt: a file or function over the limits fails (split it by meaning: a module with
a self-explaining name, a helper that names a step)."""
from __future__ import annotations

import ast
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILE_LINES = 450
FUNCTION_LINES = 60


def _sizes() -> dict[tuple[str, str], int]:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    found: dict[tuple[str, str], int] = {}
    for name in files:
        path = os.path.join(ROOT, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            source = f.read()
        lines = source.count("\n")
        if lines > FILE_LINES:
            found[(name, "")] = lines
        for node in ast.walk(ast.parse(source, name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LINES:
                    found[(name, node.name)] = length
    return found


def test_no_file_or_function_is_over_the_limits():
    over = _sizes()
    assert not over, f"over {FILE_LINES} lines per file / {FUNCTION_LINES} per function: {over}"
