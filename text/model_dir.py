"""The files of a local Hugging-Face-style model directory, read once at startup.

Owns: `ModelFiles`, which loads `config.json`, `tokenizer_config.json`, `generation_config.json`
and the chat template (a `chat_template.jinja` file wins over the `chat_template` entry of
`tokenizer_config.json`), and derives what the frontend needs from them: special-token strings,
the context length the model config allows, the vLLM "diff" sampling defaults from the generation
config (docs/text-parity.md §5.2) and the generation-config EOS ids.

Called by the app factory / worker start-up; `Tokenizer.load` and `ChatTemplate` take its values.
Runs on: worker start-up (any thread; pure file reads, no shared state afterwards).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

# Sampling fields vLLM takes from generation_config.json (its "diff" sampling params), in the
# order it lists them. `max_new_tokens` is renamed `max_tokens`.
GENERATION_SAMPLING_KEYS: tuple[str, ...] = (
    "repetition_penalty", "presence_penalty", "frequency_penalty", "temperature",
    "top_k", "top_p", "min_p", "max_new_tokens",
)

# config.json keys that bound the context length; vLLM takes the smallest present one, except
# that `model_max_length` (Command-R style) overrides the rest.
CONTEXT_LENGTH_KEYS: tuple[str, ...] = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
)

SPECIAL_TOKEN_KEYS: tuple[str, ...] = ("bos_token", "eos_token", "unk_token", "pad_token")


def _read_json(path: str) -> dict[str, Any] | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def _token_text(value: Any) -> str | None:
    """A special token as written in tokenizer_config.json: a string or `{"content": ...}`."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _pick_chat_template(model_dir: str, tokenizer_config: dict[str, Any]) -> str | None:
    path = os.path.join(model_dir, "chat_template.jinja")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    template = tokenizer_config.get("chat_template")
    if isinstance(template, list):
        # The named-templates form: [{"name": "default", "template": "..."}, ...].
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    return template if isinstance(template, str) else None


@dataclass(frozen=True)
class ModelFiles:
    """What greenfront reads from a model directory. Immutable, so safe to share across threads."""

    path: str
    tokenizer_json_path: str
    config: dict[str, Any]
    tokenizer_config: dict[str, Any]
    generation_config: dict[str, Any] | None
    chat_template: str | None
    bos_token: str | None
    eos_token: str | None
    unk_token: str | None
    pad_token: str | None
    special_tokens: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, model_dir: str) -> ModelFiles:
        """Read the directory. Raises FileNotFoundError when `tokenizer.json` is missing."""
        model_dir = os.path.abspath(model_dir)
        tokenizer_json = os.path.join(model_dir, "tokenizer.json")
        if not os.path.exists(tokenizer_json):
            raise FileNotFoundError(f"{tokenizer_json} not found")
        config = _read_json(os.path.join(model_dir, "config.json")) or {}
        tokenizer_config = _read_json(os.path.join(model_dir, "tokenizer_config.json")) or {}
        generation_config = _read_json(os.path.join(model_dir, "generation_config.json"))
        tokens = {key: _token_text(tokenizer_config.get(key)) for key in SPECIAL_TOKEN_KEYS}
        return cls(
            path=model_dir,
            tokenizer_json_path=tokenizer_json,
            config=config,
            tokenizer_config=tokenizer_config,
            generation_config=generation_config,
            chat_template=_pick_chat_template(model_dir, tokenizer_config),
            special_tokens={k: v for k, v in tokens.items() if v is not None},
            **tokens,
        )

    @property
    def max_position_embeddings(self) -> int | None:
        value = self.config.get("max_position_embeddings")
        return int(value) if value is not None else None

    @property
    def model_max_length(self) -> int | None:
        """The tokenizer's `model_max_length` (informational; vLLM does not cap by it)."""
        value = self.tokenizer_config.get("model_max_length")
        return int(value) if isinstance(value, (int, float)) else None

    def derived_max_model_len(self) -> int | None:
        """The context length the model config allows, as vLLM derives it when
        `--max-model-len` is not given (rope scaling and sliding windows are not considered)."""
        best: float | None = None
        for key in CONTEXT_LENGTH_KEYS:
            value = self.config.get(key)
            if value is not None and (best is None or value < best):
                best = value
        override = self.config.get("model_max_length")
        if override:
            best = override
        return int(best) if best is not None else None

    def _sampling_source(self) -> dict[str, Any]:
        # Without generation_config.json transformers builds one from config.json.
        if self.generation_config is not None:
            return self.generation_config
        return self.config

    def generation_defaults(self) -> dict[str, Any]:
        """vLLM's default sampling overrides from the generation config (docs/text-parity.md §5.2).

        Only non-null values of the listed fields are kept, and `max_new_tokens` becomes
        `max_tokens`. For the default model this is `{"temperature": 1.0}`.
        """
        source = self._sampling_source()
        out: dict[str, Any] = {}
        for key in GENERATION_SAMPLING_KEYS:
            value = source.get(key)
            if value is not None:
                out["max_tokens" if key == "max_new_tokens" else key] = value
        return out

    def generation_eos_token_ids(self) -> list[int]:
        """The generation config's `eos_token_id` as a list (empty when absent).

        vLLM appends the ones that differ from the tokenizer's EOS to `stop_token_ids` unless
        `ignore_eos` is set.
        """
        value = self._sampling_source().get("eos_token_id")
        if value is None:
            return []
        if isinstance(value, int):
            return [value]
        return [int(v) for v in value]
