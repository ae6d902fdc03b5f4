"""The agent APIs' streaming scenarios: request bodies and SSE event accounting.

Owns ``StreamApi`` (one streamed API: its path, request body, and the SSE events that carry its
text and its final usage), the three scenarios' APIs (``API_OF``: ``stream-chat``, the reference,
``stream-responses`` and ``stream-messages``) and ``read_events``: what a run of complete SSE
events of a Responses or Messages stream carries.

Counting: chat chunks carry the stream's cumulative ``completion_tokens`` (continuous usage
stats; ``bench.loadgen`` counts them as for ``stream``). Responses and Messages events carry no
usage until the end, so each text delta (``response.output_text.delta``,
``content_block_delta``) counts as one token when it arrives, and the final usage
(``response.completed``'s, ``message_delta``'s ``output_tokens``) reconciles the stream's count
when it comes: tokens that came without a delta of their own (a special token's empty text,
outputs merged into one delta when the stream fell behind) arrive with it. The tokens of a stream
still open at the window's end stay assumed (``tokens_counted_share``).

PERF (measurement): the load generator shares one core with the simulator and the prober, so an
event is never parsed as JSON: the delta events are counted with ``bytes.count`` on their
``event:`` line (a JSON string cannot hold a raw newline, so the line cannot occur inside data),
and only the final event is searched for its ``output_tokens``.

Runs on: the load generator process (pure functions, no state); the orchestrator reads the names.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

CHAT_SCENARIO, RESPONSES_SCENARIO, MESSAGES_SCENARIO = (
    "stream-chat", "stream-responses", "stream-messages")
#: The three scenarios, in the order each round runs them (the reference first).
AGENT_SCENARIOS = (CHAT_SCENARIO, RESPONSES_SCENARIO, MESSAGES_SCENARIO)

_OUTPUT_TOKENS = re.compile(rb'"output_tokens":(\d+)')


@dataclass(frozen=True)
class StreamApi:
    """One streamed API: where it is served and how its stream is read."""

    name: str
    path: str
    #: the ``event:`` line of a text delta, and of the event carrying the final usage (None:
    #: chat, whose chunks are counted from their continuous usage stats)
    delta_event: bytes | None = None
    final_event: bytes | None = None
    #: ``event:`` lines that report a failure inside a 200 stream
    error_events: tuple[bytes, ...] = ()

    def body(self, model: str, prompt: str, max_tokens: int) -> bytes:
        """A streamed request: one user message, greedy, ``max_tokens`` output tokens. No
        ``ignore_eos`` (Messages has no such field): the simulator's echo mode never emits EOS,
        and the load generator counts streams that ended before their limit."""
        message = [{"role": "user", "content": prompt}]
        request: dict = {"model": model, "temperature": 0, "stream": True}
        if self.name == "responses":
            request.update(input=message, max_output_tokens=max_tokens)
        else:
            request.update(messages=message, max_tokens=max_tokens)
        if self.name == "chat":
            request["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        return json.dumps(request).encode()


CHAT = StreamApi("chat", "/v1/chat/completions")
RESPONSES = StreamApi("responses", "/v1/responses",
                      delta_event=b"event: response.output_text.delta\n",
                      final_event=b"event: response.completed\n",
                      error_events=(b"event: response.failed\n", b"event: error\n"))
MESSAGES = StreamApi("messages", "/v1/messages",
                     delta_event=b"event: content_block_delta\n",
                     final_event=b"event: message_delta\n",
                     error_events=(b"event: error\n",))
API_OF = {CHAT_SCENARIO: CHAT, RESPONSES_SCENARIO: RESPONSES, MESSAGES_SCENARIO: MESSAGES}
BY_NAME = {api.name: api for api in API_OF.values()}


def read_events(api: StreamApi, done: bytes) -> tuple[int, int | None, bool]:
    """Complete SSE events of a Responses or Messages stream -> (text delta events, the final
    usage's ``output_tokens`` if the final event is among them, whether a failure event is)."""
    deltas = done.count(api.delta_event)
    final = None
    at = done.find(api.final_event)
    if at >= 0:
        # The first "output_tokens" after the event line is its usage's: Messages' usage is the
        # event's only object with it; Responses' response object puts usage after its output,
        # whose text is JSON-escaped and so cannot hold the unescaped key.
        found = _OUTPUT_TOKENS.search(done, at)
        if found is not None:
            final = int(found.group(1))
    failed = any(e in done for e in api.error_events)
    return deltas, final, failed


def account_agent_events(ex: Any, done: bytes, t: float) -> None:
    """Count complete events of a Responses or Messages stream into ``ex`` (a
    ``bench.loadgen`` stream exchange) and its run: each text delta one token as it arrives;
    the final usage reconciles the stream's count, the difference arriving with it (tokens
    whose deltas were merged or had no text: token gaps of 0). TTFT: the first text delta."""
    run = ex.run
    deltas, total, failed = read_events(ex.api, done)
    ex.failed_event = ex.failed_event or failed
    if total is not None:
        count = total - ex.tokens
        run.assumed_tokens -= ex.assumed
        ex.assumed = 0
    else:
        count = deltas
        ex.assumed += deltas
        run.assumed_tokens += deltas
    inside = run.t0 <= t <= run.t1
    if deltas:
        if not ex.events:
            ex.first = t
            ex.first_tokens = deltas
            if inside:
                run.ttft.append((t - ex.t_send) * 1000)
        elif inside:
            run.gaps.append((t - ex.last) * 1000)
            run.gaps.extend([0.0] * (deltas - 1))
        ex.events += deltas
        ex.last = t
    if inside:
        run.events_in_window += deltas
        run.tokens_in_window += count
        if ex.events and count > deltas:
            run.gaps.extend([0.0] * (count - deltas))
    ex.tokens += count
    run.seen_tokens += count
