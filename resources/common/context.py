"""The serving context: everything request conversion and rendering read about the served model.

Built once per worker by the app factory from the Config and the model directory; immutable, so
request pool threads and the HTTP hub share it without locks.

Runs on: any thread (read-only after construction).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from errors import ModelNotFound


@dataclass(frozen=True)
class ServingContext:
    """What conversion and rendering need to know; one per worker.

    Attributes:
        served_model_names: ``--served-model-name`` values; the first is reported as ``model``.
        model_path: the model directory (``root`` in /v1/models).
        tokenizer: a ``text.tokenizer.Tokenizer``.
        chat_template: a ``text.chat_template.ChatTemplate`` or None when the model has none.
        max_model_len: the context length.
        generation_defaults: vLLM's "diff" sampling defaults from generation_config.json (§5.2).
        generation_eos_ids: the generation config's ``eos_token_id`` list (§3.3 of the protocol).
        system_fingerprint: the configured fingerprint, or None (then it is never written).
        response_role: ``--response-role``.
        trust_request_chat_template: ``--trust-request-chat-template``.
        max_logprobs: ``--max-logprobs``.
        enable_force_include_usage: ``--enable-force-include-usage``.
        enable_prompt_tokens_details: ``--enable-prompt-tokens-details``.
        default_chat_template_kwargs: ``--default-chat-template-kwargs``.
        max_stop_strings: ``VLLM_MAX_STOP_STRINGS``.
        max_n: ``VLLM_MAX_N_SEQUENCES``.
        max_completion_prompts: ``VLLM_MAX_COMPLETION_PROMPTS``.
        structured_outputs_backend: the ``_backend`` written into structured-output params.
        special_tokens: ``bos_token``/``eos_token``/... text for request chat templates (used only
            with ``trust_request_chat_template``).
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
    enable_force_include_usage: bool = False
    enable_prompt_tokens_details: bool = False
    default_chat_template_kwargs: dict | None = None
    max_stop_strings: int = 4
    max_n: int = 16384
    max_completion_prompts: int = 1024
    structured_outputs_backend: str = "xgrammar"
    special_tokens: dict = field(default_factory=dict)

    @property
    def model_name(self) -> str:
        """The name responses carry in ``model``."""
        return self.served_model_names[0]

    def check_model(self, name: str | None) -> None:
        """Accept a missing/empty model or any served name; anything else is vLLM's 404.

        Raises:
            ModelNotFound: ``name`` is not served (text-parity §8.2 "unknown model").
        """
        if name and name not in self.served_model_names:
            raise ModelNotFound(name, self.served_model_names)
