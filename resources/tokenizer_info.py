"""``GET /tokenizer_info`` (``--enable-tokenizer-info-endpoint``): the tokenizer's configuration.

vLLM 0.32 answers its HF tokenizer's ``init_kwargs``: ``tokenizer_config.json`` as loaded (file
paths and the add-BOS/EOS switches the fast tokenizer consumes dropped), the added tokens by id
(their text only), ``truncation_side: "left"`` (how vLLM loads it), where it was loaded from, and
the served chat template. greenfront builds the same object from the same files; the one known
difference is ``tokenizer_class``, which names the tokenizer's class as its config does, where
vLLM names its own wrapper class (``docs/parity.md`` §3).

Runs on: the HTTP hub (the body is built once per worker, on the first call).
"""
from __future__ import annotations

import os
from typing import Any

import falcon

from base import jsonio
from runtime.state import WorkerState

#: Keys of ``tokenizer_config.json`` that vLLM's tokenizer does not keep in its ``init_kwargs``.
_DROPPED = ("vocab_file", "merges_file", "tokenizer_file", "add_bos_token", "add_eos_token",
            "added_tokens_decoder", "tokenizer_class")


class TokenizerInfoResource:
    """The tokenizer's configuration as vLLM's ``/tokenizer_info`` gives it."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state
        self._body: bytes | None = None

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self._body is None:
            self._state.ensure_started()
            self._body = jsonio.dumps(tokenizer_info(self._state))
        resp.content_type = falcon.MEDIA_JSON
        resp.data = self._body


def tokenizer_info(state: WorkerState) -> dict[str, Any]:
    """The answer's object for this worker's loaded text side."""
    model, cfg = state.model, state.config
    source = model.tokenizer_config
    info: dict[str, Any] = {"tokenizer_class": source.get("tokenizer_class")
                            or "PreTrainedTokenizerFast"}
    info.update((k, _plain(v)) for k, v in source.items() if k not in _DROPPED)
    name = cfg.tokenizer or cfg.model
    local = os.path.isdir(name)
    info.update(truncation_side="left", name_or_path=name, is_local=local,
                local_files_only=local,
                added_tokens_decoder=_added_tokens(state.tokenizer))
    template = state.chat_template
    if template is not None:
        info["chat_template"] = template.source
    else:
        info.pop("chat_template", None)
    return info


def _added_tokens(tokenizer: Any) -> dict[str, str]:
    """The tokenizer's added tokens by id (as text), in id order."""
    added = tokenizer.hf.get_added_tokens_decoder()
    return {str(i): added[i].content for i in sorted(added)}


def _plain(value: Any) -> Any:
    """An added-token object (``{"content": ...}``) as its text, as vLLM serialises it."""
    if isinstance(value, dict) and "content" in value:
        return value["content"]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
