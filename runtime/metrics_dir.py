"""The directory every worker writes its metric values to (prometheus-client's multiprocess mode).

prometheus-client reads ``PROMETHEUS_MULTIPROC_DIR`` from the environment when a worker imports
it: that variable is its only interface for the mode, so the master sets it before it forks
(the workers inherit it), and before anything in the master imports prometheus-client.

Runs on: the gunicorn master (``on_starting``).
"""
from __future__ import annotations

import logging
import os
import shutil
from typing import Any

ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare_multiprocess_dir(config: Any, log: logging.Logger) -> str:
    """Make the deployment's metrics directory and point prometheus-client at it.

    Ours (``<run dir>/prometheus``) is emptied at start: counts of a previous run would add up.
    A directory the user set is theirs to empty (vLLM says so too).
    """
    path = config.metrics_dir
    if path:
        log.warning("%s=%s was set: it must be emptied between runs, or the metrics count the "
                    "old run too", ENV, path)
    else:
        path = os.path.join(config.run_dir, "prometheus")
        shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, exist_ok=True)
    os.environ[ENV] = path  # prometheus-client's interface (module docstring)
    return path
