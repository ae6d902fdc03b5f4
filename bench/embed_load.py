"""The embeddings load: ``python -m bench.embed_load CONFIG.json OUT.json`` (its own process).

Owns the ``embed`` scenarios' load: C closed-loop clients, each POSTing ``/v1/embeddings`` with
``input`` = a batch of ``inputs`` (32) distinct texts of ``chars`` characters (~512 Tekken
tokens; ``bench.textgen``, every text of the run distinct: text ``n`` of request ``k`` is prompt
``k * inputs + n``) and ``encoding_format`` float (scenario ``embed``) or base64
(``embed-base64``), and sending the next batch as soon as the answer arrived. Each request goes on
a fresh connection, as in the ``long`` scenario: kept-alive connections would stay with the first
gunicorn worker that accepted them.

Answer accounting (``Answer``) stays light: an answer is counted from its bytes (the number of
``"embedding":`` keys must be the batch size; ``usage.prompt_tokens`` is read by a search from the
end), and every ``PARSE_EVERY``-th answer is parsed whole to check that every vector has the same
length (reported as ``dims``). PERF: a 32 x 128-float JSON answer is ~85 kB; parsing it with
orjson took 97 us, counting it 23 us (json: 710 us), so the load generator's CPU stays a few
percent of its core at a few hundred answers/s (the report's "Load side" table says how much).

The window ``[t0, t1]`` and the process layout are ``bench.loadgen``'s; this module reuses its
closed-loop plumbing (``_Load``, ``_RunExchange``, ``_request``).

Runs on: its own process, one thread, a ``bench.client.Loop``; pinned by the orchestrator.
"""
from __future__ import annotations

import base64
import json
import re
import resource
import sys
from dataclasses import dataclass
from time import monotonic
from typing import Any

import orjson

from bench.client import Connection
from bench.loadgen import _Load, _request, _RunExchange
from bench.stats import percentiles, write_result
from bench.textgen import PromptSource

#: Scenario -> ``encoding_format`` of its requests.
EMBED_SCENARIOS = {"embed": "float", "embed-base64": "base64"}
#: Texts per request, and their length: 1,810 characters of ``bench.textgen`` prose are ~512
#: tokens with the Tekken tokenizer (300 texts: mean 510 at 1,800 characters, 472-555).
INPUTS = 32
CHARS = 1810
#: Every this many answers one is parsed whole (its vectors' lengths checked).
PARSE_EVERY = 16

_EMBEDDING = b'"embedding":'
_PROMPT_TOKENS = re.compile(rb'"prompt_tokens":\s*(\d+)')


def request_body(prompts: PromptSource, model: str, request_index: int, inputs: int,
                 chars: int, encoding: str) -> bytes:
    """The JSON body of request ``request_index``: ``inputs`` distinct texts of ``chars``
    characters (prompts ``request_index * inputs`` to ``+ inputs - 1``)."""
    first = request_index * inputs
    texts = [prompts.text(first + n, chars)[:chars] for n in range(inputs)]
    return orjson.dumps({"model": model, "input": texts, "encoding_format": encoding})


@dataclass
class Answer:
    """What one 200 answer counted: its embeddings, prompt tokens, and, when it was parsed
    whole, its vectors' length (0 when not parsed). ``problem`` is set when it does not
    account for the batch (the load generator counts it as an error)."""

    embeddings: int
    prompt_tokens: int
    dims: int = 0
    problem: str = ""


def count_answer(body: bytes, inputs: int, encoding: str, parse: bool = False) -> Answer:
    """Count an ``/v1/embeddings`` answer from its bytes; with ``parse``, also decode it whole
    and check that it has ``inputs`` vectors of one length."""
    embeddings = body.count(_EMBEDDING)
    at = body.rfind(b'"prompt_tokens"')
    found = _PROMPT_TOKENS.match(body, at) if at >= 0 else None
    answer = Answer(embeddings, int(found.group(1)) if found else 0)
    if embeddings != inputs:
        answer.problem = f"{embeddings} embeddings for {inputs} inputs"
    elif not found:
        answer.problem = "no usage.prompt_tokens"
    elif parse:
        data = orjson.loads(body)["data"]
        if encoding == "base64":
            lengths = {len(base64.b64decode(d["embedding"])) // 4 for d in data}
        else:
            lengths = {len(d["embedding"]) for d in data}
        if len(lengths) != 1 or [d["index"] for d in data] != list(range(inputs)):
            answer.problem = f"vectors of lengths {sorted(lengths)}, or indices out of order"
        else:
            answer.dims = lengths.pop()
    return answer


class _EmbedExchange(_RunExchange):
    __slots__ = ("chunks", "conn", "run", "status", "t_send")

    def __init__(self, run: _EmbedRun, conn: Connection, t_send: float) -> None:
        self.run, self.conn, self.t_send = run, conn, t_send
        self.status = 0
        self.chunks: list[bytes] = []

    def on_head(self, status: int, t: float) -> None:
        self.status = status

    def on_body(self, data: bytes, t: float) -> None:
        self.chunks.append(data)


class _EmbedRun(_Load):
    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        self.prompts = PromptSource(cfg["seed"])
        self.inputs, self.chars = cfg["inputs"], cfg["chars"]
        self.encoding = cfg["encoding_format"]
        self.index = 0
        self.answers = 0
        # (t_done, latency s, prompt tokens, answer bytes) per answer finished in the window
        self.records: list[tuple[float, float, int, int]] = []
        self.dims: set[int] = set()
        self.inflight: set[_EmbedExchange] = set()

    def start(self, conn: Connection | None, now: float) -> None:
        conn = self.usable(conn, now)
        if conn is None:
            return
        body = request_body(self.prompts, self.cfg["model"], self.index, self.inputs,
                            self.chars, self.encoding)
        self.index += 1
        self.sent += 1
        ex = _EmbedExchange(self, conn, monotonic())
        self.inflight.add(ex)
        conn.send(_request(self.host, self.port, "/v1/embeddings", body, close=True), ex)

    def finished(self, ex: _EmbedExchange, t: float) -> None:
        self.inflight.discard(ex)
        body = b"".join(ex.chunks)
        if ex.status != 200:
            self.error(f"HTTP {ex.status}: {body[:200].decode(errors='replace')}", t)
        else:
            self.answers += 1
            answer = count_answer(body, self.inputs, self.encoding,
                                  parse=self.answers % PARSE_EVERY == 1)
            if answer.problem:
                self.error(f"answer: {answer.problem}", t)
            elif self.t0 <= t <= self.t1:
                self.records.append((t, t - ex.t_send, answer.prompt_tokens, len(body)))
            if answer.dims:
                self.dims.add(answer.dims)
        ex.conn.close()
        self.start(None, t)

    def run(self) -> dict[str, Any]:
        self.run_clients()
        return summary(self.records, self.t1 - self.t0, self.inputs, sent=self.sent,
                       stalled=self._stalled(ex.t_send for ex in self.inflight),
                       errors_in_window=self.errors_in_window, error_kinds=self.errors,
                       dims=sorted(self.dims), encoding=self.encoding)


def summary(records: list[tuple[float, float, int, int]], window: float, inputs: int, *,
            sent: int, stalled: int, errors_in_window: int, error_kinds: dict[str, int],
            dims: list[int], encoding: str) -> dict[str, Any]:
    """The load's figures from the answers finished in the window."""
    n = len(records)
    tokens = sum(r[2] for r in records)
    return {
        "mode": "embed", "encoding_format": encoding, "window_s": window, "sent": sent,
        "completed": n, "inputs_per_request": inputs,
        "req_per_s": n / window, "inputs_per_s": n * inputs / window,
        "prompt_tokens_per_s": tokens / window,
        "prompt_tokens_mean": tokens / n if n else 0,
        "tokens_per_input": tokens / n / inputs if n else 0,
        "answer_bytes_mean": sum(r[3] for r in records) / n if n else 0,
        "dims": dims, "latency_ms": percentiles(sorted(r[1] * 1000 for r in records)),
        "stalled": stalled, "errors": errors_in_window + stalled, "error_kinds": error_kinds,
    }


def config(base: dict[str, Any], scenario: str, concurrency: int) -> dict[str, Any]:
    """The load generator's configuration for an embed scenario (``base``: host, port, model,
    seed and the window, as ``bench.scenarios.run_phase`` builds it)."""
    return dict(base, mode="embed", concurrency=concurrency, inputs=INPUTS, chars=CHARS,
                encoding_format=EMBED_SCENARIOS[scenario])


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        cfg = json.load(f)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    write_result(argv[1], _EmbedRun(cfg).run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
