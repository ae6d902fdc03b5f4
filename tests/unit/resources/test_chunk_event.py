"""``ChunkStreamRenderer.event`` writes exactly what ``frame`` writes for the merged body."""
from __future__ import annotations

import json

from resources.completions.convert import prepare_completion
from resources.completions.render import CompletionStreamRenderer
from streaming.sse import frame


def test_event_is_frame_of_the_merged_body(ctx):
    prepared = prepare_completion({"model": "tiny", "prompt": "Hi", "stream": True}, ctx)
    renderer = CompletionStreamRenderer(prepared, ctx)
    choice = {"index": 0, "text": "é \"quoted\" \n", "logprobs": None, "finish_reason": None,
              "token_ids": [1, 2]}
    extras = [None, {}, {"usage": {"prompt_tokens": 3, "total_tokens": 5,
                                   "completion_tokens": 2}},
              {"usage": {"prompt_tokens": 3}, "system_fingerprint": "fp-1"}]
    for extra in extras:
        expected = frame({**renderer.head, "choices": [choice], **(extra or {})})
        assert renderer.event(choice, extra) == expected
        assert json.loads(expected[6:])["id"] == prepared.request_id
