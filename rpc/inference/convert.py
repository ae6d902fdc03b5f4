"""``vllm.GenerateRequest`` -> the ``PreparedRequest`` the HTTP generate path builds.

The protobuf request is rewritten as the body of ``POST /inference/v1/generate`` (token ids in,
``sampling_params`` as vLLM's ``SamplingParams`` takes them) and handed to that endpoint's
``prepare_generate``, so both interfaces build the same engine requests with the same checks.
What differs is the gRPC interface's own defaults, as vLLM 0.32's Rust frontend applies them:
an omitted ``temperature`` is greedy; omitted or zero knobs (top-k/p, min-p, penalties) take the
model's generation-config defaults; an omitted ``max_new_tokens`` is the rest of the context and
a larger one is capped to it; a text prompt is tokenized with the special tokens added;
``truncate_prompt_tokens`` keeps the prompt's last tokens.

Refused with INVALID_ARGUMENT (never ignored): multimodal ``media``, KV hints, and
``num_sequences > 1`` on the unary ``Generate`` (one response cannot carry several sequences;
``GenerateStream`` serves it).

Runs on: a request-pool thread.
"""
from __future__ import annotations

import json
import uuid
from typing import Any

from google.protobuf.json_format import MessageToDict

from streaming.prepared import PreparedRequest
from resources.generate.convert import ID_PREFIX, prepare_generate
from rpc.proto import inference_pb2 as pb
from rpc.status import Code, RpcError
from runtime.serving_context import ServingContext

#: The sampling knobs whose omission (or proto3 zero) means "the model's default".
_MODEL_DEFAULTS = {"top_k": 0, "top_p": 1.0, "min_p": 0.0, "presence_penalty": 0.0,
                   "frequency_penalty": 0.0, "repetition_penalty": 1.0}


def request_id_of(request: pb.GenerateRequest) -> str:
    """The client's ``request_id``, or a fresh one (the id ``Control.Abort`` names)."""
    return request.request_id or str(uuid.uuid4())


def prepare(request: pb.GenerateRequest, ctx: ServingContext, *, request_id: str,
            stream: bool, lora_enabled: bool = False) -> PreparedRequest:
    """Validate and convert one request (module docstring).

    Raises:
        RpcError: gRPC-only refusals (NOT_FOUND model, FAILED_PRECONDITION LoRA, ...).
        ApiError: the generate path's checks (``rpc.status`` maps them).
    """
    _refuse_unsupported(request, stream)
    if request.model and request.model not in ctx.served_model_names:
        raise RpcError(Code.NOT_FOUND, f"model `{request.model}` not found")
    if request.lora_name and not lora_enabled:
        raise RpcError(Code.FAILED_PRECONDITION, "engine was not started with LoRA enabled")
    ids = _prompt_ids(request, ctx)
    body: dict[str, Any] = {
        "request_id": request_id, "token_ids": ids, "model": request.lora_name or None,
        "sampling_params": sampling_params(request, ctx, len(ids)),
        "output_mode": "text", "stream": True, "priority": request.priority,
    }
    kv = request.kv
    for name in ("kv_transfer_params", "ec_transfer_params"):
        if kv.HasField(name):
            body[name] = MessageToDict(getattr(kv, name))
    gate = request.engine_reasoning_gate
    if gate.HasField("reasoning_ended"):
        body["reasoning_ended"] = gate.reasoning_ended
    if gate.HasField("chat_template_kwargs"):
        body["reasoning_parser_kwargs"] = {
            "chat_template_kwargs": MessageToDict(gate.chat_template_kwargs)}
    if request.lora_name and (ctx.adapters is None
                              or ctx.adapters.lora_request(request.lora_name) is None):
        raise RpcError(Code.NOT_FOUND, f"LoRA adapter `{request.lora_name}` is not loaded")
    prepared = prepare_generate(body, ctx)
    # Any non-empty salt, as vLLM's Rust frontend takes it (the HTTP route's character rules
    # are its Python frontend's).
    prepared.cache_salt = kv.cache_salt or None
    # The engine requests carry the client's id as their external id (Abort names it).
    prepared.request_id = prepared.request_id.removeprefix(ID_PREFIX)
    for choice in prepared.choices:
        choice.external_req_id = choice.external_req_id.replace(ID_PREFIX, "", 1)
    if request.HasField("session_id") and request.session_id:
        prepared.session_id = request.session_id
    return prepared


def _refuse_unsupported(request: pb.GenerateRequest, stream: bool) -> None:
    if request.media:
        raise RpcError(Code.INVALID_ARGUMENT, "multimodal input (media) is not supported")
    if request.kv_hints.actions:
        raise RpcError(Code.INVALID_ARGUMENT, "kv_hints are not supported")
    if not stream and request.sampling.num_sequences > 1:
        raise RpcError(Code.INVALID_ARGUMENT,
                       "num_sequences > 1 is served by GenerateStream only: one Generate "
                       "response carries one sequence")
    if request.decoding.bad_words_token_ids:
        raise RpcError(Code.INVALID_ARGUMENT, "bad_words_token_ids is not supported")


def _prompt_ids(request: pb.GenerateRequest, ctx: ServingContext) -> list[int]:
    kind = request.WhichOneof("prompt")
    if kind is None:
        raise RpcError(Code.INVALID_ARGUMENT, "prompt is required")
    if kind == "text":
        ids = list(ctx.tokenizer.encode_many([request.text], True)[0])
    else:
        ids = list(request.token_ids.ids)
        if not ids:
            raise RpcError(Code.INVALID_ARGUMENT, "token_ids must not be empty")
    keep = request.truncate_prompt_tokens
    if keep and len(ids) > keep:
        ids = ids[-keep:]
    return ids


def sampling_params(request: pb.GenerateRequest, ctx: ServingContext,
                    prompt_len: int) -> dict[str, Any]:
    """``SamplingParams`` as /inference/v1/generate takes them, with the gRPC defaults."""
    sampling, decoding = request.sampling, request.decoding
    stopping, response = request.stopping, request.response
    defaults = ctx.generation_defaults
    sp: dict[str, Any] = {
        "n": max(sampling.num_sequences, 1),
        "temperature": request.temperature if request.HasField("temperature") else 0.0,
    }
    for name, fallback in _MODEL_DEFAULTS.items():
        source = sampling if name in ("top_k", "top_p", "min_p") else decoding
        given = source.HasField(name) if name in ("top_k", "top_p", "min_p") else bool(
            getattr(source, name))
        sp[name] = getattr(source, name) if given else defaults.get(name, fallback)
    if sampling.HasField("seed"):
        sp["seed"] = sampling.seed
    if decoding.logit_bias:
        sp["logit_bias"] = dict(decoding.logit_bias)
    if decoding.allowed_token_ids:
        sp["allowed_token_ids"] = list(decoding.allowed_token_ids)
    structured = _structured_outputs(decoding)
    if structured is not None:
        sp["structured_outputs"] = structured
    room = max(ctx.max_model_len - prompt_len, 1)
    sp["max_tokens"] = min(stopping.max_new_tokens, room) if stopping.max_new_tokens else room
    sp["min_tokens"] = stopping.min_new_tokens
    if stopping.stop_token_ids:
        sp["stop_token_ids"] = list(stopping.stop_token_ids)
    if stopping.stop_strings:
        sp["stop"] = list(stopping.stop_strings)
    sp["include_stop_str_in_output"] = stopping.include_stop_strings
    sp["ignore_eos"] = stopping.ignore_eos
    if stopping.HasField("thinking_token_budget"):
        sp["thinking_token_budget"] = stopping.thinking_token_budget
    if request.HasField("watermarking"):
        sp["watermarking"] = request.watermarking
    _logprobs(response, sp)
    if response.HasField("skip_special_tokens"):
        sp["skip_special_tokens"] = response.skip_special_tokens
    if request.kv.bypass_prefix_cache:
        sp["skip_reading_prefix_cache"] = True
    return sp


def _logprobs(response: pb.ResponseOptions, sp: dict[str, Any]) -> None:
    """``CandidateTokens``: top_n -> k, all -> -1, token_ids -> those ids, none -> 0."""
    if response.output_logprobs:
        count, ids = _candidates(response.output_candidates
                                 if response.HasField("output_candidates") else None)
        sp["logprobs"] = count
        if ids:
            sp["logprob_token_ids"] = ids
    if response.prompt_logprobs:
        candidates = (response.prompt_candidates if response.HasField("prompt_candidates")
                      else None)
        if candidates is not None and candidates.WhichOneof("select") == "token_ids":
            raise RpcError(Code.INVALID_ARGUMENT,
                           "prompt_candidates token_ids selector is not supported")
        sp["prompt_logprobs"] = _candidates(candidates)[0]


def _candidates(candidates: pb.CandidateTokens | None) -> tuple[int | None, list[int]]:
    kind = candidates.WhichOneof("select") if candidates is not None else None
    if kind == "top_n":
        return candidates.top_n, []
    if kind == "all" and candidates.all:
        return -1, []
    if kind == "token_ids" and candidates.token_ids.ids:
        return None, list(candidates.token_ids.ids)
    return 0, []


def _structured_outputs(decoding: pb.DecodingParameters) -> dict[str, Any] | None:
    kind = decoding.WhichOneof("structured_output")
    if kind is None or (kind == "json_object" and not decoding.json_object):
        return None
    if kind == "json":
        try:
            return {"json": json.loads(decoding.json)}
        except ValueError as exc:
            raise RpcError(Code.INVALID_ARGUMENT, f"invalid json schema: {exc}") from None
    if kind == "choice":
        if not decoding.choice.choices:
            raise RpcError(Code.INVALID_ARGUMENT, "structured output choice must not be empty")
        return {"choice": list(decoding.choice.choices)}
    return {kind: getattr(decoding, kind)}
