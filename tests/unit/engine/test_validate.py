"""engine.protocol.validate: everything a real engine's input thread would die on is refused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.protocol import SamplingParams, SamplingParamsError, decode_request, validate_sampling_params

FIXTURE_DIR = Path(__file__).resolve().parents[2] / "compat" / "engine-core-fixtures"
VOCAB = 131072


def _ok(**kwargs: object) -> None:
    validate_sampling_params(SamplingParams(**kwargs), VOCAB)


def _bad(param: str | None, match: str, vocab: int | None = VOCAB, **kwargs: object) -> SamplingParamsError:
    with pytest.raises(SamplingParamsError, match=match) as info:
        validate_sampling_params(SamplingParams(**kwargs), vocab)
    assert info.value.param == param
    assert isinstance(info.value, ValueError)
    return info.value


def test_defaults_and_typical_values_pass() -> None:
    _ok()
    _ok(temperature=0.0, top_p=1.0, top_k=-1, min_p=0.0, max_tokens=1)
    _ok(temperature=2.0, top_p=0.01, top_k=50, min_p=1.0, presence_penalty=-2.0, frequency_penalty=2.0,
        repetition_penalty=0.5, seed=-(2**63), logprobs=-1, prompt_logprobs=0, min_tokens=16, max_tokens=16,
        stop=["\n", "END"], stop_token_ids=[13], eos_token_id=2, all_stop_token_ids=[2, 13],
        logit_bias={7: 100.0, 42: -100}, allowed_token_ids=[1, 2], extra_args={"sim_tokens": [5, 6], "big": 2**64 - 1},
        bad_words=["x"], bad_words_token_ids=[[5], [6, 7]], thinking_token_budget=-1, stream_interval=1,
        structured_outputs={"json": {"type": "object"}, "regex": None, "_backend": "xgrammar"},
        repetition_detection={"max_pattern_size": 4, "min_pattern_size": 2, "min_count": 3})
    _ok(stop="single")
    _ok(temperature=1)  # ints are fine where floats are expected


def test_every_fixture_request_passes() -> None:
    """Everything a real 0.32 engine accepted (or vLLM's frontend produced) must pass."""
    index = json.loads((FIXTURE_DIR / "index.json").read_text())
    adds = [f for f in index["fixtures"] if f["kind"] == "ADD"]
    assert len(adds) == 26
    for fx in adds:
        frames = [(FIXTURE_DIR / fr["file"]).read_bytes() for fr in fx["frames"]]
        _, req = decode_request(frames[1:])
        validate_sampling_params(req.sampling_params, VOCAB)


@pytest.mark.parametrize(
    ("param", "match", "kwargs"),
    [
        ("temperature", r"temperature must be in \[0, 2\], got 5.0", {"temperature": 5.0}),
        ("temperature", "temperature must be in", {"temperature": -0.1}),
        ("temperature", "finite", {"temperature": math.nan}),
        ("temperature", "finite", {"temperature": math.inf}),
        ("temperature", "must be a number", {"temperature": "hot"}),
        ("temperature", "must be a number", {"temperature": True}),
        ("top_p", r"top_p must be in \(0, 1\]", {"top_p": 0.0}),
        ("top_p", r"top_p must be in \(0, 1\]", {"top_p": 1.5}),
        ("top_k", "top_k must be 0 or -1", {"top_k": -2}),
        ("top_k", "must be an integer", {"top_k": 2.0}),
        ("top_k", "must be an integer", {"top_k": True}),
        ("min_p", r"min_p must be in \[0, 1\]", {"min_p": 1.01}),
        ("presence_penalty", r"\[-2, 2\]", {"presence_penalty": 2.5}),
        ("frequency_penalty", r"\[-2, 2\]", {"frequency_penalty": -3.0}),
        ("repetition_penalty", "greater than zero", {"repetition_penalty": 0.0}),
        ("repetition_penalty", "finite", {"repetition_penalty": math.inf}),
        ("max_tokens", "at least 1", {"max_tokens": 0}),
        ("max_tokens", "must be set", {"max_tokens": None}),
        ("min_tokens", "greater than or equal to 0", {"min_tokens": -1}),
        ("min_tokens", "less than or equal to max_tokens", {"min_tokens": 9, "max_tokens": 8}),
        ("logprobs", "non-negative or -1", {"logprobs": -2}),
        ("prompt_logprobs", "non-negative or -1", {"prompt_logprobs": -5}),
        ("n", "n must be 1", {"n": 2}),
        ("seed", "64-bit", {"seed": 2**63}),
        ("stop", "empty string", {"stop": ["a", ""]}),
        ("stop", "empty string", {"stop": ""}),
        ("stop", "list of strings", {"stop": ["a", 3]}),
        ("stop", "detokenize", {"stop": ["a"], "detokenize": False}),
        ("stop_token_ids", "out-of-vocab", {"stop_token_ids": [VOCAB]}),
        ("stop_token_ids", "integer token ids", {"stop_token_ids": ["13"]}),
        ("eos_token_id", "out of vocab", {"eos_token_id": -1}),
        ("logit_bias", "out-of-vocab", {"logit_bias": {VOCAB + 5: 1.0}}),
        ("logit_bias", "integer token ids", {"logit_bias": {"7": 1.0}}),
        ("logit_bias", "finite", {"logit_bias": {7: math.nan}}),
        ("allowed_token_ids", "empty", {"allowed_token_ids": []}),
        ("allowed_token_ids", "out-of-vocab", {"allowed_token_ids": [VOCAB]}),
        ("bad_words", "out-of-vocab", {"bad_words_token_ids": [[5], [VOCAB]]}),
        ("logprob_token_ids", "at most 128", {"logprob_token_ids": list(range(129))}),
        ("stream_interval", "at least 1", {"stream_interval": 0}),
        ("output_kind", "0, 1 or 2", {"output_kind": 3}),
        ("thinking_token_budget", "non-negative or -1", {"thinking_token_budget": -2}),
        ("structured_outputs", "exactly one constraint", {"structured_outputs": {"_backend": "xgrammar"}}),
        ("structured_outputs", "exactly one constraint",
         {"structured_outputs": {"json": "{}", "regex": "a+", "_backend": "xgrammar"}}),
        ("extra_args", "64 bits", {"extra_args": {"x": [2**64]}}),
        ("extra_args", "string keys", {"extra_args": {1: "x"}}),
        ("extra_args", "cannot be sent", {"extra_args": {"x": object()}}),
        ("repetition_detection", "non-negative integer", {"repetition_detection": {"min_count": -1}}),
        ("ignore_eos", "boolean", {"ignore_eos": 1}),
        ("skip_reading_prefix_cache", "boolean", {"skip_reading_prefix_cache": "yes"}),
    ],
)
def test_out_of_range_values_are_refused(param: str, match: str, kwargs: dict) -> None:
    err = _bad(param, match, **kwargs)
    assert err.value is not None or param == "max_tokens"


def test_vocab_checks_are_skipped_without_a_vocab_size() -> None:
    validate_sampling_params(SamplingParams(stop_token_ids=[10**6], logit_bias={10**6: 1.0}), None)
    _bad("stop_token_ids", "out-of-vocab", None, stop_token_ids=[-1])


def test_error_carries_param_and_value() -> None:
    err = _bad("top_p", "top_p", top_p=2.0)
    assert err.value == 2.0
    with pytest.raises(SamplingParamsError) as info:
        validate_sampling_params("not params", VOCAB)  # type: ignore[arg-type]
    assert info.value.param is None
