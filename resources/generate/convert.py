"""/inference/v1/generate request -> ``PreparedRequest`` (one engine request per sample).

Owns the conversion order of vLLM 0.32's ``ServingTokens``: body shape, cache salt, field types
and SamplingParams checks, model (404), serving refusals, the prompt's vocabulary, the server's
``max_tokens`` when the request leaves it out, the engine client's checks (logprobs and token
ids, prompt length), and finally the wire ``SamplingParams``: built with the shared builder
(EOS, stop ids, structured outputs, bad words, output kind), then given back what that builder
shapes for the OpenAI endpoints only (``logit_bias`` unclamped, ``extra_args`` with the
transfer parameters, ``detokenize`` and the other fields ``SamplingParams`` takes as they are).

Called by: ``resources.generate.resource``.
Runs on: request pool threads.
"""
from __future__ import annotations

from typing import Any

import msgspec

from engine.protocol import SamplingParams, SamplingParamsError, validate_sampling_params
from base.errors import InvalidRequest
from runtime.serving_context import ServingContext
from resources.common.fields import require_object
from streaming.prepared import PreparedChoice, PreparedRequest, now, response_id
from resources.common.prompts import check_vocab
from resources.common.sampling import build_sampling_params, fan_out
from resources.common.sampling_rules import check_engine_side
from resources.generate import types, validate

ID_PREFIX = "generate-tokens-"


def prepare_generate(body: Any, ctx: ServingContext, *,
                     header_request_id: str | None = None) -> PreparedRequest:
    """Validate and convert a parsed /inference/v1/generate body.

    Args:
        body: the parsed JSON (any type; non-objects get vLLM's 400).
        ctx: the serving context.
        header_request_id: the ``X-Request-Id`` header, which wins over the body's
            ``request_id``.

    Returns:
        The prepared request (``output_mode`` set).

    Raises:
        RequestValidationError: schema/type errors ("Bad Request").
        ModelNotFound: unknown ``model``.
        InvalidRequest: vLLM's semantic 400s, and greenfront's refusals.
    """
    body = require_object(body)
    validate.check_raw(body)
    f, sp, provided = validate.parse_request(body, ctx)
    lora = ctx.resolve_model(f.model)
    validate.check_request(f, sp, tokens_only=ctx.tokens_only)

    ids = f.token_ids
    check_vocab(ctx, ids)
    max_tokens = sp.max_tokens
    if "max_tokens" not in provided:
        max_tokens = validate.default_max_tokens(ctx, len(ids))
    if ctx.tokens_only:
        validate.check_tokens_only_engine_side(sp)
    check_engine_side(sp, ctx)
    validate.check_prompt_length(ctx, len(ids))
    validate.check_routed_experts_start(sp, len(ids))
    if max_tokens is None:  # null: the engine client generates up to the context length
        max_tokens = ctx.max_model_len - len(ids)

    stream = bool(f.stream)
    wire = _to_wire(f, sp, ctx, max_tokens=max_tokens, stream=stream)
    options = f.stream_options if stream else None
    include_usage = bool(options and options["include_usage"])
    request_id = response_id(ID_PREFIX, f.request_id, header_request_id)
    n = sp.n
    choices = [
        PreparedChoice(
            index=i, prompt_index=0, external_req_id=f"{i}_{request_id}" if n > 1 else request_id,
            prompt_token_ids=ids, prompt_text=None, sampling_params=child)
        for i, child in enumerate(fan_out(wire, n))]
    return PreparedRequest(
        kind="generate", request_id=request_id, created=now(), model=ctx.response_model(lora),
        stream=stream, choices=choices, include_usage=include_usage,
        continuous_usage=include_usage and bool(options["continuous_usage_stats"]),
        return_token_ids=bool(f.return_token_ids), logprobs=sp.logprobs, n=n,
        priority=f.priority, cache_salt=f.cache_salt, lora_request=lora,
        output_mode=f.output_mode)


def _to_wire(f: types.GenerateRequest, sp: types.GenerateSampling, ctx: ServingContext, *,
             max_tokens: int, stream: bool) -> SamplingParams:
    """The wire SamplingParams for one sample (n = 1 on the wire; ``fan_out`` makes n)."""
    wire = build_sampling_params(sp, ctx, n=sp.n, max_tokens=max_tokens,
                                 logprobs=sp.logprobs, prompt_logprobs=sp.prompt_logprobs,
                                 stream=stream)
    extra_args = sp.extra_args
    for name in ("kv_transfer_params", "ec_transfer_params"):
        value = getattr(f, name)
        if value is not None:  # vLLM hands disaggregation parameters to the engine this way
            extra_args = dict(extra_args or {}, **{name: value})
    skip_prefix = sp.skip_reading_prefix_cache
    wire = msgspec.structs.replace(
        wire, logit_bias=sp.logit_bias, extra_args=extra_args,
        detokenize=sp.detokenize and not ctx.tokens_only,  # --tokens-only: never (vLLM's)
        flat_logprobs=sp.flat_logprobs, prompt_logprob_start=sp.prompt_logprob_start,
        routed_experts_prompt_start=sp.routed_experts_prompt_start,
        skip_reading_prefix_cache=(wire.skip_reading_prefix_cache if skip_prefix is None
                                   else skip_prefix))
    try:
        validate_sampling_params(wire, ctx.tokenizer.vocab_size)
    except SamplingParamsError as exc:
        raise InvalidRequest(str(exc), param=exc.param) from None
    return wire
