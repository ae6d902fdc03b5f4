"""/v1/completions checks, in the order vLLM 0.32 runs them, with its wording (docs/text-parity.md §8.2).

``check_raw`` mirrors the model-level checks vLLM applies to the raw JSON object before field
types are validated; ``check_request`` the serving-layer checks on the typed fields.

Called by: ``resources.completions.convert``.
Runs on: request pool threads (pure functions).
"""
from __future__ import annotations

from typing import Any

from base.errors import InvalidRequest
from runtime.serving_context import ServingContext
from resources.common.newer_fields import refuse_unserved
from resources.common.sampling import plain_error
from resources.common.sampling_rules import (check_logprob_counts, check_raw_constraints,
                                             refuse_unimplemented)
from resources.completions.types import CompletionRequest


def _check_logprobs_raw(body: dict) -> None:
    if body.get("logprob_token_ids") and body.get("use_beam_search"):
        raise InvalidRequest("`logprob_token_ids` is not supported with beam search.",
                             param="logprob_token_ids")
    if body.get("use_beam_search") and body.get("echo") and body.get("logprobs") is not None:
        raise InvalidRequest("`echo` with `logprobs` is not supported with beam search because "
                             "beam search does not compute prompt logprobs.", param="echo")
    if body.get("logprob_token_ids") and body.get("echo") and body.get("max_tokens") == 0:
        raise InvalidRequest("`logprob_token_ids` is not supported when `echo=True` and "
                             "`max_tokens=0` because no output tokens are generated.",
                             param="logprob_token_ids")
    if body.get("logprob_token_ids") and body.get("logprobs") is None:
        raise InvalidRequest("when using `logprob_token_ids`, `logprobs` must be set.",
                             param="logprob_token_ids")
    check_logprob_counts(body, ("prompt_logprobs", "logprobs"))
    logprobs = body.get("logprobs")
    if logprobs is not None and logprobs < 0 and logprobs != -1:
        raise InvalidRequest("`logprobs` must be a positive value or -1.", param="logprobs",
                             value=logprobs, show_value=True)


def check_raw(body: dict, ctx: ServingContext) -> None:
    """vLLM's "before" validators of CompletionRequest (they run last-defined first); 0.33's
    ``return_weight_versions`` refused."""
    refuse_unserved(body, "completions")
    prompt = body.get("prompt")
    if (isinstance(prompt, list) and prompt and not all(type(p) is int for p in prompt)
            and len(prompt) > ctx.max_completion_prompts):
        raise InvalidRequest(f"prompt list length {len(prompt)} exceeds the maximum allowed count "
                             f"of {ctx.max_completion_prompts}. To increase this limit, set the "
                             "VLLM_MAX_COMPLETION_PROMPTS environment variable.", param="prompt")
    embeds = body.get("prompt_embeds")
    if (prompt is None or prompt == "") and (embeds is None or embeds == []):
        raise InvalidRequest("Either prompt or prompt_embeds must be provided and non-empty.",
                             param="prompt")
    if body.get("stream_options") and not body.get("stream"):
        raise InvalidRequest("Stream options can only be defined when `stream=True`.",
                             param="stream_options")
    _check_logprobs_raw(body)
    so = body.get("structured_outputs")
    if isinstance(so, dict) and sum(so.get(k) is not None for k in ("json", "regex",
                                                                     "choice")) > 1:
        raise InvalidRequest("You can only use one kind of constraints for structured outputs "
                             "('json', 'regex' or 'choice').", param="structured_outputs")
    check_raw_constraints(body)


def check_request(f: CompletionRequest) -> None:
    """Serving-layer refusals that come before tokenization.

    Raises:
        InvalidRequest: beam search (streamed: vLLM's message; otherwise unsupported here),
            prompt embeddings, logits processors, suffix (no FIM rendering for this model).
    """
    if f.stream and f.use_beam_search:
        raise InvalidRequest("Streaming is not currently supported with beam search")
    refuse_unimplemented(f)
    if f.suffix is not None:
        if f.echo:
            raise plain_error("Echo is unsupported with suffix.", "suffix")
        if f.truncate_prompt_tokens is not None:
            raise plain_error("suffix is not supported with truncate_prompt_tokens", "suffix")
        prompt = f.prompt
        textual = isinstance(prompt, str) or all(isinstance(p, str) for p in prompt or ())
        raise plain_error("suffix is only supported for models with FIM completion rendering"
                          if textual else "suffix requires text prompt input for FIM completion "
                          "rendering", "suffix")
