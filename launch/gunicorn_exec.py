"""What both launchers (``launch.frontend`` and ``launch.serve``) end with: the settings' file
paths made absolute, then this process replaced by gunicorn serving greenfront.

Runs on: the launcher process, which becomes the gunicorn master.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Settings holding paths: gunicorn runs from the repository, while paths given on a command
#: line are relative to the directory it was started in.
PATH_SETTINGS = ("GREENFRONT_MODEL", "GREENFRONT_TOKENIZER", "GREENFRONT_CHAT_TEMPLATE")


def absolute_paths(settings: dict[str, str]) -> None:
    """Make the existing paths among ``settings`` absolute, in place."""
    for name in PATH_SETTINGS:
        value = settings.get(name)
        if value and os.path.exists(value):
            settings[name] = os.path.abspath(value)


def exec_gunicorn(settings: dict[str, str]) -> None:
    """Replace this process by gunicorn serving greenfront with ``settings`` over the
    environment (the command line's settings win)."""
    env = dict(os.environ)
    env.update(settings)
    os.chdir(ROOT)
    args = [sys.executable, "-m", "gunicorn", "-c", os.path.join(ROOT, "gunicorn.conf.py"),
            "app:api"]
    os.execve(sys.executable, args, env)
