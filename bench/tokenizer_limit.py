"""The tokenizer's own limit: ``python -m bench.tokenizer_limit CONFIG.json OUT.json``.

Owns scenario 3: the throughput of greenfront's ``text.tokenizer.Tokenizer`` (the same backend,
the same ``encode`` call the server makes, ids turned into a Python list included) on the same
prompts as the long-prompt scenario (``bench.textgen``, same seed and indices), with T plain
threads and no server, pinned by the orchestrator to the server's cores. The server's long-prompt
throughput divided by this is "how close the server gets to its tokenizer".

Prompts are made before the clock starts (making one costs about as much as fastokens takes to
encode it) and reused round-robin when the run outlasts them; no tokenizer here caches whole
texts (fastokens' segment cache is off, and would not hit on this text anyway).

Runs on: its own process; T native threads (``encode`` releases the GIL).
"""
from __future__ import annotations

import itertools
import json
import resource
import sys
import threading
from time import monotonic
from typing import Any

from bench.deploy import machine_busy_seconds
from bench.textgen import PromptSource


def measure(model_dir: str, backend: str, threads: int, duration: float, chars: int,
            seed: int, prompts: int) -> dict[str, Any]:
    """Encode distinct prompts with ``threads`` threads for ``duration`` seconds."""
    from text.tokenizer import Tokenizer  # the server's own wrapper

    tokenizer = Tokenizer.load(model_dir, backend)
    source = PromptSource(seed)
    texts = [source.text(i + 1, chars) for i in range(prompts)]
    for text in texts[:3]:  # first calls pay one-off set-up (regex JIT, allocations)
        tokenizer.encode(text, add_special_tokens=True)
    counter = itertools.count()
    done: list[tuple[int, int]] = []  # (prompts, tokens) per thread
    start = monotonic()
    stop = start + duration

    def work() -> None:
        n = tokens = 0
        while monotonic() < stop:
            text = texts[next(counter) % len(texts)]
            tokens += len(tokenizer.encode(text, add_special_tokens=True))
            n += 1
        done.append((n, tokens))

    before = resource.getrusage(resource.RUSAGE_SELF)
    busy_before = machine_busy_seconds()
    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = monotonic() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    other = max(0.0, machine_busy_seconds() - busy_before - cpu)
    count = sum(n for n, _ in done)
    tokens = sum(t for _, t in done)
    return {
        "backend": backend, "threads": threads, "wall_s": wall, "prompts": count,
        "distinct_prompts": min(count, len(texts)), "chars": chars,
        "prompts_per_s": count / wall, "tokens_per_s": tokens / wall,
        "chars_per_token": chars / (tokens / count) if tokens else 0.0,
        "cpu_s_per_prompt": cpu / count if count else 0.0,
        "other_cpu_share": other / wall,  # other processes' CPU meanwhile (cores)
    }


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        cfg = json.load(f)
    result = measure(cfg["model_dir"], cfg["backend"], cfg["threads"], cfg["duration"],
                     cfg["chars"], cfg["seed"], cfg["prompts"])
    with open(argv[1], "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
