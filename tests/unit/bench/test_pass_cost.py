"""bench.pass_cost drives real bodies on the direct write: every step reaches every client."""
from __future__ import annotations

import os

from bench.pass_cost import measure


def test_every_step_reaches_every_stream_as_one_event():
    model = os.environ.get("GREENFRONT_TEST_MODEL_DIR", "models/tekken-tiny")
    per_step, events = measure(model, streams=6, steps=5)
    assert per_step > 0
    assert events == 6 * (1 + 5)  # the first chunk, then one per step
