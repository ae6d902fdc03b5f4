"""Tool-call ids as vLLM 0.32 makes them: ``chatcmpl-tool-`` and 16 random hex digits.

Runs on: any thread (a per-process generator, seeded from os.urandom; ids are not secrets).
"""
from __future__ import annotations

import random

_ids = random.Random()


def new_call_id() -> str:
    return f"chatcmpl-tool-{_ids.getrandbits(64):016x}"
