"""Prepared requests: the hand-off from request conversion to the engine client and the renderers.

``prepare_completion``/``prepare_chat`` return a ``PreparedRequest``; each of its ``choices`` is
one engine request (a prompt times one of its ``n`` samples), with the wire ``SamplingParams``
filled in completely and the frontend-only options the detokenizer and renderers need. A pooling
endpoint's converter returns a ``PooledRequest`` (one engine request per input) instead.
Nothing here is mutated after conversion, so it may cross from the request pool to the HTTP hub.

Runs on: built on request pool threads; read on the HTTP hub.
"""
from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.protocol import LoRARequest, PoolingParams, SamplingParams


#: Request-id randomness (ids are not secrets; random.Random is seeded from os.urandom).
_ids = random.Random()

def random_request_id() -> str:
    """16 lowercase hex digits, random like the low 64 bits of vLLM's ``random_uuid``.

    PERF: uuid4 reads os.urandom (a syscall) per call: 12% of pool-thread time when streaming
    short requests. A per-process generator seeded from os.urandom is as unique here.
    """
    return f"{_ids.getrandbits(64):016x}"


def response_id(prefix: str, body_request_id: str | None, header_request_id: str | None) -> str:
    """``cmpl-``/``chatcmpl-`` plus the X-Request-Id header, else body ``request_id``, else random
    (docs/text-parity.md §5.2: the header wins)."""
    base = header_request_id or body_request_id or random_request_id()
    return f"{prefix}{base}"


def now() -> int:
    return int(time.time())


@dataclass
class PreparedChoice:
    """One engine request.

    Attributes:
        index: the OpenAI ``choices[].index`` (``prompt_index * n + sample``).
        prompt_index: which prompt of the request this samples.
        external_req_id: the user-visible id vLLM would give this engine request
            (``<id>-<prompt>`` for completions, ``<sample>_<...>`` for n > 1 children).
        prompt_token_ids: the prompt after truncation, exactly as sent (a ``TokenIds`` buffer
            for tokenized text with fastokens, else a list).
        prompt_text: the prompt text used for completions echo (None when unknown).
        sampling_params: the complete wire struct (one per choice: seeds differ for n > 1).
            The detokenizer options (the frontend applies stop strings) and the logprob
            counts are read from it (the properties below).
    """

    index: int
    prompt_index: int
    external_req_id: str
    prompt_token_ids: Sequence[int]
    prompt_text: str | None
    sampling_params: SamplingParams

    @property
    def skip_special_tokens(self) -> bool:
        return self.sampling_params.skip_special_tokens

    @property
    def spaces_between_special_tokens(self) -> bool:
        return self.sampling_params.spaces_between_special_tokens

    @property
    def stop(self) -> list[str]:
        return list(self.sampling_params.stop or ())

    @property
    def include_stop_str_in_output(self) -> bool:
        return self.sampling_params.include_stop_str_in_output

    @property
    def min_tokens(self) -> int:
        return self.sampling_params.min_tokens

    @property
    def logprobs(self) -> int | None:
        """Top-k sample logprobs requested (None: no logprobs)."""
        return self.sampling_params.logprobs

    @property
    def prompt_logprobs(self) -> int | None:
        """Prompt logprobs requested (None: none)."""
        return self.sampling_params.prompt_logprobs


@dataclass
class PreparedRequest:
    """A converted request: what to send and how to render what comes back.

    Attributes:
        kind: "completion", "chat" or "generate".
        request_id: the response ``id`` (``cmpl-…``/``chatcmpl-…``).
        created: ``created`` (taken once, repeated in every chunk).
        model: the name written into responses: the adapter's when ``lora_request`` is set,
            else the first served model name.
        stream: SSE response.
        include_usage / continuous_usage: ``stream_options`` after ``--enable-force-include-usage``.
        return_token_ids: vLLM's ``return_token_ids``.
        echo: completions echo / chat echo.
        echo_only: completions ``echo`` with ``max_tokens: 0`` (engine runs 1 token, output hidden).
        logprobs: completions ``logprobs`` / chat ``top_logprobs`` when chat ``logprobs`` is on.
        return_tokens_as_token_ids: write logprob tokens as ``token_id:<id>``.
        n: samples per prompt; num_prompts: prompts in the request.
        choices: the engine requests, ordered by ``index``.
        priority, session_id, cache_salt: EngineCoreRequest fields (``resources.request_headers``
            sets priority and session_id from the headers).
        lora_request: the runtime LoRA adapter the request named as ``model`` (the
            EngineCoreRequest field of every choice), or None for the base model.
        response_role: chat ``message.role`` / first-chunk role.
        echo_content: chat echo text to prefix (the last message's content when its role matches).
        prompt_text: chat ``prompt_text`` (the rendered template) when asked for, else None.
        reasoning_ended, reasoning_parser_kwargs: the EngineCoreRequest fields vLLM's chat
            frontend fills for structured outputs with reasoning: True constrains from the
            first token (``include_reasoning: false``, or a prompt that already closed the
            thought), False waits for the engine's reasoning parser to see the thought end,
            None leaves it to the engine; the kwargs carry the chat template kwargs.
        chat_parsing: chat only: what the output parsers must do for this request
            (``resources.chat.parsing.ChatParsing``), or None when no parser is configured.
        output_mode: /inference/v1/generate's ``output_mode`` ("tokens" or "text"); None for
            the OpenAI endpoints.
        beam: a beam-search request's plan (``resources.common.beam.BeamPlan``): ``choices``
            then holds one entry per prompt (its prompt), not one per engine request; None
            for sampling.
    """

    kind: str
    request_id: str
    created: int
    model: str
    stream: bool
    choices: list[PreparedChoice]
    include_usage: bool = False
    continuous_usage: bool = False
    return_token_ids: bool = False
    echo: bool = False
    echo_only: bool = False
    logprobs: int | None = None
    return_tokens_as_token_ids: bool = False
    n: int = 1
    num_prompts: int = 1
    priority: int = 0
    session_id: str | None = None
    cache_salt: str | None = None
    response_role: str = "assistant"
    echo_content: str = ""
    prompt_text: str | None = None
    lora_request: LoRARequest | None = None
    reasoning_ended: bool | None = None
    reasoning_parser_kwargs: dict | None = None
    chat_parsing: Any = None
    output_mode: str | None = None
    beam: Any = None


@dataclass
class PooledItem:
    """One input: one engine request."""

    external_req_id: str
    prompt_token_ids: list[int]
    pooling_params: PoolingParams


@dataclass
class PooledRequest:
    """A converted pooling request (``resources/pooled/convert.py`` builds it): what
    ``streaming.submit.start_generation`` submits, one engine request per input."""

    request_id: str
    model: str
    choices: list[PooledItem]
    fields: dict[str, Any]
    lora_request: LoRARequest | None = None
    cache_salt: str | None = None
    priority: int = 0
    session_id: str | None = None
    reasoning_ended: bool | None = None
    reasoning_parser_kwargs: dict | None = None
    extra: dict[str, Any] = field(default_factory=dict)
