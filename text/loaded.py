"""The model's text side (model files, tokenizer, chat template), loaded once per deployment.

PERF: the tokenizers are most of a worker's memory and start-up: the Hugging Face tokenizer
(decoding) and fastokens (encoding) of the Tekken model take ~150 MB and ~140 MB of RSS and 1-3 s
of CPU each to load. The gunicorn master loads them before it forks (``gunicorn.conf.py``), so
every worker shares those pages copy-on-write and starts without loading anything; a restarted
worker too. Loading does not start the tokenizers' thread pools, so forking after it is safe
(each worker's first encode starts its own).

Runs on: the gunicorn master (``load``, before fork), then each worker process (``load`` returns
what the master loaded; a process that did not preload loads it then).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

_loaded: dict[tuple[str, str, str], "TextSide"] = {}


@dataclass(frozen=True)
class TextSide:
    model: Any  # text.model_dir.ModelFiles
    tokenizer: Any  # text.tokenizer.Tokenizer
    chat_template: Any  # text.chat_template.ChatTemplate | None


def load(tokenizer_dir: str, backend: str, chat_template: str) -> TextSide:
    """The text side for these settings, loaded on the first call in this process (or the
    master that forked it). ``chat_template`` is ``--chat-template``: a path, text, or ""."""
    key = (tokenizer_dir, backend, chat_template)
    side = _loaded.get(key)
    if side is None:
        from text.chat_template import ChatTemplate
        from text.model_dir import ModelFiles
        from text.tokenizer import Tokenizer

        model = ModelFiles.load(tokenizer_dir)
        tokenizer = Tokenizer.from_files(model, backend=backend)
        template = _chat_template_text(chat_template) or model.chat_template
        side = _loaded[key] = TextSide(
            model, tokenizer, ChatTemplate(template, model.special_tokens) if template else None)
    return side


def _chat_template_text(value: str) -> str | None:
    """``--chat-template``: a file path, or the template itself."""
    if not value:
        return None
    if os.path.isfile(value):
        with open(value, encoding="utf-8") as f:
            return f.read()
    return value
