"""/v1/completions request -> ``PreparedRequest`` (one engine request per prompt and sample).

Owns the conversion order of vLLM 0.32: body shape, raw checks, field types, model (404),
serving refusals, prompt parsing and tokenization (docs/text-parity.md §4.1, §4.3), then per prompt the
``max_tokens`` budget and SamplingParams (docs/text-parity.md §5.2), and finally the engine-side empty-prompt check.

Called by: ``resources/completions/resource.py``.
Runs on: request pool threads (tokenization releases the GIL).
"""
from __future__ import annotations

from typing import Any

from base.errors import InvalidRequest
from runtime.serving_context import ServingContext
from resources.common.fields import parse_struct, require_object
from streaming.prepared import PreparedChoice, PreparedRequest, now, response_id
from resources.common.beam import beam_plan
from resources.common.prompts import (check_not_empty, make_rule, tokenize_ids, tokenize_texts)
from resources.common.sampling import (build_sampling_params, fan_out, max_tokens_for,
                                       usage_flags)
from resources.completions import types, validate


def _split_prompts(prompt: Any) -> list[str | list[int]]:
    """The validated ``prompt`` union as a list of prompts (text or token ids)."""
    if isinstance(prompt, str):
        return [prompt]
    if not prompt:
        return []
    if all(type(p) is int for p in prompt):
        return [prompt]
    return list(prompt)


def _tokenized_prompts(f: types.CompletionRequest, ctx: ServingContext, requested: int | None
                       ) -> tuple[list, list[list[int]]]:
    """The request's prompts and their token ids (truncated and length-checked)."""
    rule = make_rule(ctx, max_output_tokens=requested or 0, output_param="max_tokens",
                     truncate_prompt_tokens=f.truncate_prompt_tokens,
                     truncation_side=f.truncation_side,
                     add_special_tokens=f.add_special_tokens)
    prompts = _split_prompts(f.prompt)
    if not prompts:
        raise InvalidRequest("You must pass at least one prompt")
    texts = [p for p in prompts if isinstance(p, str)]
    encoded = iter(tokenize_texts(ctx, texts, rule) if texts else ())
    return prompts, [next(encoded) if isinstance(p, str) else tokenize_ids(ctx, p, rule)
                     for p in prompts]


def _echoed_text(ctx: ServingContext, prompt: Any, ids: list[int], echo: bool,
                 return_token_ids: bool) -> str | None:
    """The prompt text an ``echo`` response starts with (None without echo)."""
    if not echo:
        return None
    if return_token_ids:
        return ""  # NOTE: vLLM echoes an empty prompt text when token ids are returned
    return prompt if isinstance(prompt, str) else ctx.tokenizer.decode(ids, False)


def prepare_completion(body: Any, ctx: ServingContext, *,
                       header_request_id: str | None = None) -> PreparedRequest:
    """Validate and convert a parsed /v1/completions body.

    Args:
        body: the parsed JSON (any type; non-objects get vLLM's 400).
        ctx: the serving context.
        header_request_id: the ``X-Request-Id`` header, which names the response when present.

    Raises:
        RequestValidationError: schema/type errors ("Bad Request").
        ModelNotFound: unknown ``model``.
        InvalidRequest: every semantic 400 of docs/text-parity.md §8.2 that conversion detects.
    """
    body = require_object(body)
    validate.check_raw(body, ctx)
    f = parse_struct(body, types.fields(ctx.max_stop_strings), types.CompletionRequest)
    lora = ctx.resolve_model(f.model)
    validate.check_request(f)

    requested = types.DEFAULT_MAX_TOKENS if f.max_tokens is None else f.max_tokens
    echo = bool(f.echo)
    prompts, token_prompts = _tokenized_prompts(f, ctx, requested)

    stream = bool(f.stream)
    include_usage, continuous = usage_flags(f, ctx) if stream else (False, False)
    n = f.n
    logprobs = f.logprobs
    prompt_logprobs = f.prompt_logprobs
    if prompt_logprobs is None and echo:
        prompt_logprobs = logprobs  # vLLM echoes prompt logprobs with the same k
    echo_only = echo and requested == 0  # engine runs one token; the response shows the prompt
    return_token_ids = bool(f.return_token_ids)
    request_id = response_id("cmpl-", f.request_id, header_request_id)

    if f.use_beam_search:
        return _beam_request(f, ctx, prompts, token_prompts, requested, request_id, lora)
    choices: list[PreparedChoice] = []
    for pi, (prompt, ids) in enumerate(zip(prompts, token_prompts)):
        budget = max_tokens_for(ctx, requested, len(ids))
        sp = build_sampling_params(f, ctx, n=n, max_tokens=1 if echo_only else budget,
                                   logprobs=logprobs, prompt_logprobs=prompt_logprobs,
                                   stream=stream)
        check_not_empty(ids)
        text = _echoed_text(ctx, prompt, ids, echo, return_token_ids)
        base_id = f"{request_id}-{pi}"
        for i, child in enumerate(fan_out(sp, n)):
            choices.append(PreparedChoice(
                index=pi * n + i, prompt_index=pi,
                external_req_id=f"{i}_{base_id}" if n > 1 else base_id,
                prompt_token_ids=ids, prompt_text=text, sampling_params=child))

    return PreparedRequest(
        kind="completion", request_id=request_id, created=now(), model=ctx.response_model(lora),
        stream=stream, choices=choices, include_usage=include_usage,
        continuous_usage=continuous, return_token_ids=return_token_ids, echo=echo,
        echo_only=echo_only, logprobs=logprobs,
        return_tokens_as_token_ids=ctx.tokens_as_ids(f.return_tokens_as_token_ids), n=n,
        num_prompts=len(prompts), priority=f.priority, cache_salt=f.cache_salt,
        lora_request=lora)


def _beam_request(f: types.CompletionRequest, ctx: ServingContext, prompts: list,
                  token_prompts: list[list[int]], requested: int, request_id: str,
                  lora: Any) -> PreparedRequest:
    """A beam-search completion (``resources.common.beam``): one choice per prompt, carrying
    the prompt; the sampling fields do not apply (vLLM builds no SamplingParams for it)."""
    echo = bool(f.echo)
    return_token_ids = bool(f.return_token_ids)
    budgets = [max_tokens_for(ctx, requested, len(ids)) for ids in token_prompts]
    plan = beam_plan(f, ctx, f.n, budgets)
    for ids in token_prompts:
        check_not_empty(ids)
    choices = [PreparedChoice(index=pi, prompt_index=pi, external_req_id=request_id,
                              prompt_token_ids=ids,
                              prompt_text=_echoed_text(ctx, prompt, ids, echo, return_token_ids),
                              sampling_params=plan.step_params)
               for pi, (prompt, ids) in enumerate(zip(prompts, token_prompts))]
    return PreparedRequest(
        kind="completion", request_id=request_id, created=now(), model=ctx.response_model(lora),
        stream=False, choices=choices, return_token_ids=return_token_ids, echo=echo,
        echo_only=echo and requested == 0, logprobs=f.logprobs,
        return_tokens_as_token_ids=ctx.tokens_as_ids(f.return_tokens_as_token_ids), n=f.n,
        num_prompts=len(prompts), cache_salt=f.cache_salt, lora_request=lora, beam=plan)
