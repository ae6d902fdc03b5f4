"""The longest silence of an engine with requests in flight, measured from outside.

One probe stream decodes (``ignore_eos``) while long prompts are prefilled beside it: each engine
step brings the probe one token, so the gaps between its chunks are the engine's step times,
the chunked-prefill steps of the long prompts included. This is what
``GREENFRONT_ENGINE_STALL_TIMEOUT`` must stay above (docs/operations.md §4).

    python -m bench.step_gaps --url http://127.0.0.1:18000 --prompt-tokens 4000 --long 6

Works against any OpenAI-compatible server that takes token-id prompts (vLLM, greenfront).
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time

import requests


def _probe(url: str, model: str, tokens: int, arrivals: list[float], started: threading.Event,
           ) -> None:
    body = {"model": model, "prompt": [1000, 2000, 3000], "max_tokens": tokens,
            "temperature": 0, "ignore_eos": True, "stream": True}
    with requests.post(url + "/v1/completions", json=body, stream=True, timeout=600) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                arrivals.append(time.monotonic())
                started.set()


def _long_prompt(url: str, model: str, length: int, seed: int, ttfts: list[float]) -> None:
    rng = random.Random(seed)
    body = {"model": model, "prompt": [rng.randrange(1000, 100000) for _ in range(length)],
            "max_tokens": 1, "temperature": 0}
    t0 = time.monotonic()
    resp = requests.post(url + "/v1/completions", json=body, timeout=600)
    resp.raise_for_status()
    ttfts.append(time.monotonic() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--prompt-tokens", type=int, default=4000, help="length of each long prompt")
    ap.add_argument("--long", type=int, default=6, help="long prompts, sent in pairs")
    ap.add_argument("--probe-tokens", type=int, default=3500,
                    help="the probe's max_tokens (it is left once the long prompts are done)")
    args = ap.parse_args()
    arrivals: list[float] = []
    started = threading.Event()
    probe = threading.Thread(target=_probe, args=(args.url, args.model, args.probe_tokens, arrivals,
                                                  started), daemon=True)
    probe.start()
    started.wait(120)
    ttfts: list[float] = []
    for pair in range(0, args.long, 2):
        jobs = [threading.Thread(target=_long_prompt,
                                 args=(args.url, args.model, args.prompt_tokens, pair + i, ttfts))
                for i in range(min(2, args.long - pair))]
        for job in jobs:
            job.start()
        for job in jobs:
            job.join()
    done = time.monotonic()
    seen = [t for t in arrivals if t <= done]
    gaps = sorted(b - a for a, b in zip(seen, seen[1:]))
    print(json.dumps({
        "probe_chunks": len(seen),
        "max_gap_s": round(gaps[-1], 3),
        "p99_gap_s": round(gaps[int(len(gaps) * 0.99)], 3),
        "median_gap_s": round(statistics.median(gaps), 4),
        "long_prompts": len(ttfts), "long_prompt_tokens": args.prompt_tokens,
        "long_ttft_max_s": round(max(ttfts), 3) if ttfts else None,
    }))


if __name__ == "__main__":
    main()
