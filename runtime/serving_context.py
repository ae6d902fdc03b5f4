"""The serving context: everything request conversion and rendering read about the served model.

Built once per worker (``runtime.state``) from the Config (each knob below is a setting there), the model directory and the engines'
registration, with the runtime LoRA adapter registry attached when that is on; immutable, so
request pool threads and the HTTP hub share it without locks.

Model names are resolved in one place, ``ServingContext.resolve_model`` (``check_model`` for the
endpoints that only accept or refuse the name): a served name or none is the base model, a
loaded runtime LoRA adapter's name is that adapter, anything else is vLLM's 404.

Runs on: any thread (read-only after construction).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.protocol import LoRARequest
from base.errors import ModelNotFound
from text.output_parsers import OutputParsers


class AdapterLookup(Protocol):
    """The runtime LoRA adapters (``runtime.lora_registry.LoraRegistry``)."""

    def lora_request(self, name: str) -> LoRARequest | None:
        """The adapter called ``name`` as an ADD's ``lora_request``, or None. Cheap, thread-safe,
        never blocks or yields: it is called on request-pool threads."""


@dataclass(frozen=True)
class ServingContext:
    """What conversion and rendering need to know; one per worker.

    Attributes:
        served_model_names: ``--served-model-name`` values; the first is reported as ``model``.
        model_path: the model directory (``root`` in /v1/models).
        tokenizer: a ``text.tokenizer.Tokenizer``.
        chat_template: a ``text.chat_template.ChatTemplate`` or None when the model has none.
        max_model_len: the context length.
        generation_defaults: vLLM's "diff" sampling defaults from generation_config.json (docs/text-parity.md §5.2).
        generation_eos_ids: the generation config's ``eos_token_id`` list (docs/engine-protocol.md §3.3).
        system_fingerprint: the configured fingerprint, or None (then it is never written).
        response_role: ``--response-role``.
        trust_request_chat_template: ``--trust-request-chat-template``.
        max_logprobs: ``--max-logprobs``.
        stream_interval: ``--stream-interval`` (the server-wide one; requests may raise it).
        enable_force_include_usage: ``--enable-force-include-usage``.
        enable_prompt_tokens_details: ``--enable-prompt-tokens-details``.
        return_tokens_as_token_ids: ``--return-tokens-as-token-ids`` (a request's own field wins).
        exclude_tools_when_tool_choice_none: ``--exclude-tools-when-tool-choice-none``.
        enable_per_request_metrics: ``--enable-per-request-metrics``.
        default_chat_template_kwargs: ``--default-chat-template-kwargs``
            (``GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS``).
        max_stop_strings: ``VLLM_MAX_STOP_STRINGS``.
        max_n: ``VLLM_MAX_N_SEQUENCES``.
        max_completion_prompts: ``VLLM_MAX_COMPLETION_PROMPTS``.
        structured_outputs_backend: ``--structured-outputs-config``'s backend (``auto`` resolves
            per request, as vLLM's frontend does).
        special_tokens: ``bos_token``/``eos_token``/... text for request chat templates (used only
            with ``trust_request_chat_template``).
        adapters: the runtime LoRA adapters a request may name as ``model``
            (``VLLM_ALLOW_RUNTIME_LORA_UPDATING``), or None.
        output_parsers: the tool-call and reasoning parser classes (``--tool-call-parser``
            with ``--enable-auto-tool-choice``, ``--reasoning-parser``).
        tokens_only: ``--tokens-only``: requests are served as vLLM serves them without a
            tokenizer (no detokenization, no EOS id of the tokenizer; ``docs/parity.md`` §9).
    """

    served_model_names: tuple[str, ...]
    model_path: str
    tokenizer: Any
    chat_template: Any
    max_model_len: int
    generation_defaults: dict = field(default_factory=dict)
    generation_eos_ids: list = field(default_factory=list)
    system_fingerprint: str | None = None
    response_role: str = "assistant"
    trust_request_chat_template: bool = False
    max_logprobs: int = 20
    stream_interval: int = 1
    enable_force_include_usage: bool = False
    enable_prompt_tokens_details: bool = False
    return_tokens_as_token_ids: bool = False
    exclude_tools_when_tool_choice_none: bool = False
    enable_per_request_metrics: bool = False
    default_chat_template_kwargs: dict | None = None
    max_stop_strings: int = 4
    max_n: int = 16384
    max_completion_prompts: int = 1024
    structured_outputs_backend: str = "auto"
    special_tokens: dict = field(default_factory=dict)
    adapters: AdapterLookup | None = None
    output_parsers: OutputParsers = field(default_factory=OutputParsers)
    tokens_only: bool = False

    @property
    def model_name(self) -> str:
        """The name responses carry in ``model`` when the request names no adapter."""
        return self.served_model_names[0]

    def tokens_as_ids(self, requested: bool | None) -> bool:
        """Whether logprob tokens are ``token_id:N``: the request's own field, else the server's
        ``--return-tokens-as-token-ids``."""
        return self.return_tokens_as_token_ids if requested is None else requested

    def response_model(self, lora: LoRARequest | None) -> str:
        """The ``model`` of a response: the adapter's name, else the first served name (vLLM's
        ``OpenAIServingModels.model_name(lora_request)``)."""
        return lora.lora_name if lora is not None else self.model_name

    def resolve_model(self, name: str | None) -> LoRARequest | None:
        """A request's ``model``: None for the base model (a missing/empty name or a served
        one), the adapter's ``lora_request`` for a loaded runtime LoRA adapter (vLLM 0.32's
        ``_check_model`` then ``_maybe_get_adapters``), else vLLM's 404.

        Raises:
            ModelNotFound: ``name`` is neither served nor a loaded adapter (docs/text-parity.md §8.2
                "unknown model"; the message lists the served names only, as vLLM's does).
        """
        if not name or name in self.served_model_names:
            return None
        if self.adapters is not None:
            lora = self.adapters.lora_request(name)
            if lora is not None:
                return lora
        raise ModelNotFound(name, self.served_model_names)

    def check_model(self, name: str | None) -> None:
        """``resolve_model`` for endpoints that only accept or refuse the name (/tokenize and
        /detokenize: vLLM tokenizes the same way for an adapter)."""
        self.resolve_model(name)
