"""The layering contract (.importlinter, docs/architecture.md §1) holds for every package."""
from __future__ import annotations

import configparser
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_import_linter_contracts_are_kept():
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    run = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_every_package_is_under_the_contract():
    """A new top-level package must be added to .importlinter, or nothing checks its imports."""
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, ".importlinter"))
    listed = set(parser["importlinter"]["root_packages"].split())
    packages = {name for name in os.listdir(ROOT)
                if os.path.isfile(os.path.join(ROOT, name, "__init__.py"))}
    # Outside the served program: the benchmark and the tests import from everywhere.
    assert packages - {"bench", "tests"} <= listed, packages - {"bench", "tests"} - listed
    # The top-level modules left are the two the design names: the app and gunicorn's settings.
    modules = {name for name in os.listdir(ROOT) if name.endswith(".py")}
    assert modules == {"app.py", "gunicorn.conf.py"}, modules
