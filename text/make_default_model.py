"""Build greenfront's default model directory (tokenizer and configs, no weights).

Owns: `python -m text.make_default_model OUT_DIR [--force] [--markers]`, which writes a Hugging-Face-style
directory that describes the same tokenizer and chat template as the reference tiny model
(`interop/make_tiny_model.py`), converted by our own code (`text.tekken`) from the
Tekken file that the `mistral-common` package ships as data:

    tokenizer.json          byte-level BPE converted from tekken_240911.json
    tokenizer_config.json   bos/eos/unk/pad tokens, model_max_length, chat_template
    generation_config.json  {"bos_token_id":1,"eos_token_id":2,"do_sample":true,"temperature":1.0}
    config.json             minimal Llama-like config (max_position_embeddings 4096, vocab 131072)
    .complete               written last; its presence makes a rerun a no-op

With `--markers` (`models/tekken-markers`) unused control tokens become the tool-call and
reasoning marker tokens of `text.marker_tokens`, with a ChatML template that renders tools.

Called by `make` on a fresh machine and by the test fixtures. Takes about two seconds.
Runs on: a build step (plain process).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from typing import Any

from text import marker_tokens, tekken

TEKKEN_FILE = "tekken_240911.json"
COMPLETE_MARKER = ".complete"
MAX_POSITION_EMBEDDINGS = 4096

# Mistral-Nemo style template: `<s>[INST]user[/INST]answer</s>`, with the system prompt folded
# into the last user turn. Same string as the reference model's (it is data, restated).
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] %}"
    "{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set loop_messages = messages %}{%- endif %}"
    "{{- bos_token }}"
    "{%- for message in loop_messages %}"
    "{%- if message['role'] == 'user' %}"
    "{%- if loop.last and system_message is defined %}"
    "{{- '[INST]' + system_message + '\\n\\n' + message['content'] + '[/INST]' }}"
    "{%- else %}{{- '[INST]' + message['content'] + '[/INST]' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{- message['content'] + eos_token }}"
    "{%- endif %}"
    "{%- endfor %}"
)


def tekken_path() -> str:
    """Path of the Tekken file inside the installed (never imported) `mistral-common` package."""
    spec = importlib.util.find_spec("mistral_common")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("mistral-common is not installed (pip install --no-deps mistral-common)")
    return os.path.join(list(spec.submodule_search_locations)[0], "data", TEKKEN_FILE)


def _write_json(directory: str, name: str, obj: Any, *, indent: int | None = 2) -> None:
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=indent)


def add_markers(doc: dict[str, Any]) -> None:
    """Rename filler control tokens to the parsers' marker tokens (``text.marker_tokens``)."""
    added = {entry["id"]: entry for entry in doc["added_tokens"]}
    vocab = doc["model"]["vocab"]
    for offset, (text, special) in enumerate(marker_tokens.MARKERS):
        token_id = marker_tokens.FIRST_FREE_ID + offset
        entry = added[token_id]
        if not entry["content"].startswith("<SPECIAL_"):
            raise ValueError(f"control token {token_id} is {entry['content']!r}, not a filler")
        del vocab[entry["content"]]
        vocab[text] = token_id
        entry["content"], entry["special"] = text, special


def build(out_dir: str, *, force: bool = False, markers: bool = False) -> str:
    """Write the model directory at `out_dir` unless it is already complete; returns `out_dir`.

    With ``markers`` the tokenizer also has every tool/reasoning family's marker tokens and the
    chat template renders tools (``text.marker_tokens``): the tool-calling test model.

    The files are written into a sibling temporary directory that is renamed into place, so a
    crash never leaves a half-written directory that looks complete.
    """
    out_dir = os.path.abspath(out_dir)
    if os.path.exists(os.path.join(out_dir, COMPLETE_MARKER)) and not force:
        return out_dir
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".tmp-model-", dir=parent)
    try:
        _write_files(work, markers)
        open(os.path.join(work, COMPLETE_MARKER), "w").close()
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.rename(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out_dir


def _write_files(work: str, markers: bool) -> None:
    """The model directory's files (tokenizer, its config, generation and model config) into
    ``work``."""
    doc = tekken.convert_tekken(tekken.load_tekken(tekken_path()))
    if markers:
        add_markers(doc)
    vocab = doc["model"]["vocab"]
    vocab_size = len(vocab)
    bos_id, eos_id = vocab["<s>"], vocab["</s>"]
    # PERF: compact JSON keeps the 17 MB file quick to write and to load.
    _write_json(work, "tokenizer.json", doc, indent=None)
    _write_json(work, "tokenizer_config.json", {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "clean_up_tokenization_spaces": False,
        "model_max_length": MAX_POSITION_EMBEDDINGS,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": marker_tokens.TOOL_CHAT_TEMPLATE if markers else CHAT_TEMPLATE,
    })
    _write_json(work, "generation_config.json", {
        "bos_token_id": bos_id, "eos_token_id": eos_id, "do_sample": True, "temperature": 1.0,
    })
    _write_json(work, "config.json", {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 64,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    })


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        print("usage: python -m text.make_default_model OUT_DIR [--force] [--markers]",
              file=sys.stderr)
        return 2
    out = build(args[0], force="--force" in argv, markers="--markers" in argv)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
