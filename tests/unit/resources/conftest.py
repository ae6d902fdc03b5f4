"""Fixtures for the resources tests: a serving context over the real test model, and helpers that
drive a prepared request through hand-made engine outputs to the bytes a client would see."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from engine.protocol import EngineCoreOutput
from resources.chat.convert import prepare_chat
from resources.chat.render import ChatStreamRenderer, render_chat_response
from runtime.serving_context import ServingContext
from resources.completions.convert import prepare_completion
from resources.completions.render import CompletionStreamRenderer, render_completion_response
from text.chat_template import ChatTemplate
from text.model_dir import ModelFiles
from tests.support.bodies import BodyRun
from text.tokenizer import Tokenizer

FINGERPRINT = "vllm-0.32.0-416808fb"
# Greedy output of the reference tiny model for "The capital of France is" (docs/text-parity.md §3.2).
FRANCE = [3795, 115370, 73750, 4756, 27797, 35424, 4756, 27797]
# Greedy chat output for [user "Say hi"] (docs/text-parity.md §6.4).
SAY_HI = [40571, 82503, 5533, 79904, 10817, 51390, 54961, 66030]


@pytest.fixture(scope="session")
def model_files(model_dir: str) -> ModelFiles:
    return ModelFiles.load(model_dir)


@pytest.fixture(scope="session")
def ctx(model_files: ModelFiles) -> ServingContext:
    tokenizer = Tokenizer.from_files(model_files)
    template = ChatTemplate(model_files.chat_template, model_files.special_tokens)
    return ServingContext(
        served_model_names=("tiny",), model_path=model_files.path, tokenizer=tokenizer,
        chat_template=template, max_model_len=2048,
        generation_defaults=model_files.generation_defaults(),
        generation_eos_ids=model_files.generation_eos_token_ids(),
        system_fingerprint=FINGERPRINT, special_tokens=dict(model_files.special_tokens))


def output(token_ids: list[int], finish: int | None = None, stop_reason: Any = None,
           **kw: Any) -> EngineCoreOutput:
    return EngineCoreOutput("req", list(token_ids), finish_reason=finish,
                            stop_reason=stop_reason, **kw)


@pytest.fixture
def run(ctx: ServingContext) -> Callable[..., bytes]:
    """run(kind, body, tokens, finish=1, stop_reason=None) -> response bytes: one token per
    engine step (the last output carries the finish reason) for choice 0, through the real
    response bodies (``tests.support.bodies``)."""
    def go(kind: str, body: dict, tokens: list[int], finish: int = 1, stop_reason: Any = None,
           context: ServingContext | None = None) -> bytes:
        c = context or ctx
        completion = kind == "completion"
        prepared = (prepare_completion if completion else prepare_chat)(body, c)
        return BodyRun(prepared, c,
                       CompletionStreamRenderer if completion else ChatStreamRenderer,
                       render_completion_response if completion else render_chat_response,
                       ).tokens(tokens, finish, stop_reason).response()
    return go
