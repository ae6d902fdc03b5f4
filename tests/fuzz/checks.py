"""What every answer to a generated request must look like, and the deployment afterwards.

``check_answer``: 2xx, or a 4xx whose body is exactly OpenAI's envelope
``{"error": {"message", "type", "param", "code"}}`` with ``code`` equal to the status; a 200
event stream whose events are JSON objects (or ``[DONE]``, last), an error event never carrying a
5xx code; a 2xx JSON body that parses (text bodies, /metrics', are taken as they are). ``check_drained``: ``/health`` 200, no request left in the
frontend (``/load``) or in the engine (the engine's own running/waiting gauges on ``/metrics``).
"""
from __future__ import annotations

import collections
import json
import re
import time

import requests

STREAM_TIMEOUT = 60.0


TALLY: collections.Counter = collections.Counter()
"""(where's first two words, status, error type or "stream"/"json") -> count, for the summary."""


class BadAnswer(AssertionError):
    """An answer that breaks the contract; the message says how, with the request."""


def _anthropic(where: str) -> bool:
    """/v1/messages answers its handler's errors in Anthropic's envelope, streams as Anthropic's
    events (docs/messages.md)."""
    return " /v1/messages" in where


def _anthropic_envelope(status: int, body: object, raw: bytes, where: str) -> bool:
    """Whether ``body`` is Anthropic's error envelope (then it must be well formed)."""
    if not (_anthropic(where) and isinstance(body, dict) and body.get("type") == "error"):
        return False
    error = body.get("error")
    if not (set(body) == {"type", "error"} and isinstance(error, dict)
            and set(error) == {"type", "message"} and isinstance(error["type"], str)
            and isinstance(error["message"], str)):
        raise BadAnswer(f"{where}: malformed Anthropic error envelope: {raw[:300]!r}")
    return True


def _envelope(status: int, raw: bytes, where: str) -> None:
    try:
        body = json.loads(raw)
    except ValueError:
        raise BadAnswer(f"{where}: {status} body is not JSON: {raw[:300]!r}") from None
    if _anthropic_envelope(status, body, raw, where):
        return
    error = body.get("error") if isinstance(body, dict) else None
    if not (isinstance(body, dict) and set(body) == {"error"} and isinstance(error, dict)
            and set(error) == {"message", "type", "param", "code"}):
        raise BadAnswer(f"{where}: {status} body is not OpenAI's error envelope: {raw[:300]!r}")
    if (not isinstance(error["message"], str) or not isinstance(error["type"], str)
            or error["code"] != status or not isinstance(error["param"], (str, type(None)))):
        raise BadAnswer(f"{where}: malformed error fields: {raw[:300]!r}")


def _stream(resp: requests.Response, where: str) -> int:
    """Read a whole event stream; returns the number of events."""
    events, done = 0, False
    for line in resp.iter_lines(chunk_size=None, delimiter=b"\n"):
        if not line:
            continue
        if done:
            raise BadAnswer(f"{where}: data after [DONE]: {line[:200]!r}")
        if line.startswith(b"event: ") and _anthropic(where):
            continue
        if not line.startswith(b"data: "):
            raise BadAnswer(f"{where}: not an SSE data line: {line[:200]!r}")
        data = line[6:]
        events += 1
        if data == b"[DONE]":
            done = True
            continue
        try:
            event = json.loads(data)
        except ValueError:
            raise BadAnswer(f"{where}: event is not JSON: {data[:300]!r}") from None
        if not isinstance(event, dict):
            raise BadAnswer(f"{where}: event is not an object: {data[:300]!r}")
        error = event.get("error")
        if error is not None and _anthropic(where):
            # Anthropic's error event has no status: any is a failure after the 200.
            raise BadAnswer(f"{where}: stream ended with an error event: {data[:400]!r}")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            if not isinstance(code, int) or code >= 500:
                raise BadAnswer(f"{where}: stream ended with a server error: {data[:400]!r}")
    return events


def check_answer(resp: requests.Response, where: str) -> None:
    """Raise ``BadAnswer`` unless ``resp`` (not yet read when streamed) keeps the contract."""
    status = resp.status_code
    key = " ".join(where.split(" ", 2)[:2]).split("?")[0]
    if status >= 500 or status < 200 or 300 <= status < 400:
        raise BadAnswer(f"{where}: status {status}: {resp.content[:600]!r}")
    if status >= 400:
        _envelope(status, resp.content, where)
        error = json.loads(resp.content)["error"]
        TALLY[(key, status, error["type"])] += 1
        return
    kind = resp.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        TALLY[(key, status, f"stream of {min(_stream(resp, where), 10)}+ events")] += 1
        return
    TALLY[(key, status, "")] += 1
    if resp.content and kind.startswith("application/json"):
        try:
            json.loads(resp.content)
        except ValueError:
            raise BadAnswer(f"{where}: 2xx body is not JSON: {resp.content[:300]!r}") from None


_GAUGE = re.compile(rb"^vllm:num_requests_(running|waiting)\{[^}]*\} ([0-9.e+-]+)$", re.M)


def engine_requests(url: str) -> float:
    """Requests the engines report running or waiting (their scheduler stats, via /metrics)."""
    text = requests.get(url + "/metrics", timeout=10).content
    return sum(float(v) for _, v in _GAUGE.findall(text))


def check_drained(url: str, timeout: float = 30.0) -> None:
    """The deployment is healthy and holds no request, in the frontend nor in the engine.

    Polls for up to ``timeout`` seconds: aborts and the engine's idle stats message travel
    asynchronously after the last answer."""
    deadline = time.time() + timeout
    last = ""
    while time.time() < deadline:
        health = requests.get(url + "/health", timeout=10).status_code
        load = requests.get(url + "/load", timeout=10).json()["server_load"]
        engine = engine_requests(url)
        last = f"/health {health}, frontend in flight {load}, engine running+waiting {engine}"
        if health == 200 and load == 0 and engine == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"deployment not drained after {timeout} s: {last}")
