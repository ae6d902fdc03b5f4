"""``make bench``'s embed scenarios: the request body (32 distinct texts of ~512 tokens), the
accounting of an answer from its bytes, the load's summary figures, the plan's deployments and
the report's tables (hand-made answers and phase results)."""
from __future__ import annotations

import argparse
import base64
import json
import struct
from typing import Any

import pytest

from bench import report
from bench.embed_load import CHARS, INPUTS, count_answer, request_body, summary
from bench.plan import embed_steps
from bench.report_embed import embed_tables
from bench.textgen import PromptSource


@pytest.fixture(scope="module")
def prompts() -> PromptSource:
    return PromptSource(0)


def test_a_body_has_32_distinct_texts_and_the_next_request_32_others(prompts):
    first = json.loads(request_body(prompts, "tiny", 0, INPUTS, CHARS, "float"))
    second = json.loads(request_body(prompts, "tiny", 1, INPUTS, CHARS, "base64"))
    assert first["model"] == "tiny" and first["encoding_format"] == "float"
    assert second["encoding_format"] == "base64"
    assert len(first["input"]) == len(set(first["input"])) == INPUTS
    assert not set(first["input"]) & set(second["input"])
    assert {len(t) for t in first["input"]} == {CHARS}
    # The same index gives the same texts (a rerun sends the same load).
    assert request_body(prompts, "tiny", 1, INPUTS, CHARS, "base64") == request_body(
        prompts, "tiny", 1, INPUTS, CHARS, "base64")


def test_texts_are_about_512_tokens(prompts, model_dir):
    from text.tokenizer import Tokenizer
    tokenizer = Tokenizer.load(model_dir, backend="hf")
    texts = json.loads(request_body(prompts, "tiny", 3, INPUTS, CHARS, "float"))["input"]
    mean = sum(len(tokenizer.encode(t, add_special_tokens=True)) for t in texts) / len(texts)
    assert 460 < mean < 570


def _answer(vectors: list[list[float]], encoding: str, prompt_tokens: int = 1234) -> bytes:
    def enc(v: list[float]) -> Any:
        return (base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()
                if encoding == "base64" else v)
    return json.dumps({"id": "embd-1", "object": "list", "created": 1, "model": "tiny",
                       "data": [{"index": i, "object": "embedding", "embedding": enc(v)}
                                for i, v in enumerate(vectors)],
                       "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}}
                      ).encode()


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_an_answer_is_counted_from_its_bytes_and_checked_when_parsed(encoding):
    body = _answer([[0.5, -0.25, 0.125]] * 4, encoding)
    counted = count_answer(body, 4, encoding)
    assert (counted.embeddings, counted.prompt_tokens, counted.dims, counted.problem) == (
        4, 1234, 0, "")
    parsed = count_answer(body, 4, encoding, parse=True)
    assert (parsed.dims, parsed.problem) == (3, "")


def test_answers_that_do_not_account_for_the_batch_are_problems():
    assert count_answer(_answer([[0.5]] * 3, "float"), 4, "float").problem == (
        "3 embeddings for 4 inputs")
    no_usage = _answer([[0.5]] * 4, "float").replace(b'"prompt_tokens"', b'"tokens"')
    assert count_answer(no_usage, 4, "float").problem == "no usage.prompt_tokens"
    ragged = _answer([[0.5, 0.5], [0.5]], "float")
    assert count_answer(ragged, 2, "float").problem == ""  # not parsed: not checked
    assert "lengths [1, 2]" in count_answer(ragged, 2, "float", parse=True).problem


def test_the_summary_counts_requests_inputs_and_tokens_in_the_window():
    records = [(1.0, 0.1, 16_000, 80_000), (2.0, 0.3, 16_400, 82_000)]
    out = summary(records, 10.0, 32, sent=3, stalled=0, errors_in_window=1,
                  error_kinds={"HTTP 500: x": 1}, dims=[128], encoding="float")
    assert out["req_per_s"] == pytest.approx(0.2)
    assert out["inputs_per_s"] == pytest.approx(6.4)
    assert out["prompt_tokens_per_s"] == pytest.approx(3240.0)
    assert out["tokens_per_input"] == pytest.approx(16_200 / 32)
    assert out["answer_bytes_mean"] == 81_000
    assert out["latency_ms"]["p50"] == pytest.approx(100.0)
    assert out["errors"] == 1 and out["dims"] == [128]


def _args(**kw: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"scenarios": ["embed", "embed-base64"], "no_greenfront": False,
                                 "vllm_peers": ["python", "rust", "greenfront"], **kw})


def test_the_plan_puts_the_embed_scenarios_on_pooling_deployments_of_capable_peers():
    made = []

    def mk(backend, offload, workers, scen, pooling=False):
        made.append((backend, offload, workers, pooling))
        return ("greenfront", scen)
    steps = embed_steps(_args(), mk, 2, lambda kind, scen: (kind, scen))
    assert made == [("fastokens", True, 2, True)]
    # vLLM's Rust frontend serves no pooling routes: no embed step for it.
    assert [s[0] for s in steps] == ["greenfront", "python", "greenfront"]
    assert embed_steps(_args(scenarios=["long"]), mk, 2) == []
    assert embed_steps(_args(no_greenfront=True), mk, 2, lambda k, s: k) == ["python",
                                                                             "greenfront"]


def _phase(endpoint: str, scenario: str, req_per_s: float, server_cpu_s: float,
           health_p999: float) -> dict[str, Any]:
    window = 25.0
    load = summary([(1.0, 0.07, 16_448, 86_000)] * int(req_per_s * window), window, 32, sent=0,
                   stalled=0, errors_in_window=0, error_kinds={}, dims=[128],
                   encoding="float" if scenario == "embed" else "base64")
    health = {"p50": 0.5, "p99": 2.0, "p99.9": health_p999, "max": 9.0}
    return {"endpoint": endpoint, "scenario": scenario, "settings": {"kind": endpoint},
            "load": load, "health": {"latency_ms": health, "errors": 0},
            "cpu_s": {"server": server_cpu_s, "window_s": window},
            "timing": {"long_concurrency": 32, "probe_rate": 200.0}}


def test_the_report_has_every_embed_phase_and_greenfront_over_each_peer():
    phases = [_phase("greenfront pooling", "embed", 200.0, 20.0, 5.0),
              _phase("vllm-python pooling", "embed", 40.0, 30.0, 20.0),
              _phase("greenfront pooling", "embed-base64", 220.0, 20.0, 4.0)]
    text = "\n".join(embed_tables({"phases": phases}))
    assert "32 distinct inputs of ~514 tokens per request, 32 concurrent" in text
    assert "vectors of 128 floats" in text
    assert ("| greenfront pooling | float | 200.0 | 6,400 | 3,289,600 | 70.0 ms | 70.0 ms "
            "| 0.5 ms | 2.0 ms | 5.0 ms | 9.0 ms | 0 | 4.0 | 86.0 |") in text
    # 5× the requests/s, 1/4 of the /health p99.9, 4.0 vs 30.0 ms of CPU per request.
    assert "| embed | vllm-python pooling | 5.00× | 1.00× | 1.00× | 1.00× | 0.25× | 0.13× |" in text
    assert "| embed-base64 | vllm-python" not in text  # no peer phase to divide by
    assert embed_tables({"phases": [dict(phases[0], scenario="long")]}) == []


def test_embed_phases_stay_out_of_the_generation_side_by_side_table():
    phases = [_phase("vllm-python pooling", "embed", 40.0, 30.0, 20.0),
              _phase("greenfront pooling", "embed", 200.0, 20.0, 5.0)]
    assert report._side_by_side({"phases": phases}) == []
