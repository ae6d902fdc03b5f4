"""Tool-call parsers by name (vLLM's ``--tool-call-parser`` values) and the plugin loader.

Built-in families are modules of this package, imported on first use. A plugin is a Python file
(``--tool-parser-plugin`` / ``GREENFRONT_TOOL_PARSER_PLUGIN``) that registers its own class::

    from text.tool_parsers import ToolParser, register_tool_parser

    @register_tool_parser("my_format")
    class MyParser(ToolParser): ...

Runs on: start-up (``load_plugin``, ``get``) of each worker; the registry is written only then.
"""
from __future__ import annotations

import importlib.util
import os
import sys

from text.parsed import HARMONY_UNAVAILABLE
from text.parser_registry import ParserRegistry
from text.tool_parsers.base import ToolParser

#: vLLM's parser name -> the module of this package that registers it.
BUILTIN: dict[str, str] = {
    "hermes": "hermes",
    "llama3_json": "llama_json",
    "llama4_json": "llama_json",
    "pythonic": "pythonic",
    "llama4_pythonic": "pythonic",
    "granite": "granite",
    "mistral": "mistral",
    "qwen3_xml": "qwen3_xml",
    "qwen3_coder": "qwen3_xml",
    "glm45": "glm47",
    "glm47": "glm47",
    "kimi_k2": "kimi_k2",
    "minimax_m2": "minimax_m2",
    "deepseek_v3": "deepseek",
    "deepseek_v31": "deepseek",
}

_PARSERS: ParserRegistry[type[ToolParser]] = ParserRegistry(
    "tool call parser", ToolParser, "text.tool_parsers", BUILTIN,
    unavailable={"openai": HARMONY_UNAVAILABLE})

#: Class decorator: make a ToolParser subclass the parser called ``name`` (a later registration
#: wins, so a plugin may replace a built-in family).
register_tool_parser = _PARSERS.register
#: The class registered as ``name`` (KeyError, listing the known names, when none is).
get_tool_parser = _PARSERS.get
names = _PARSERS.names


def load_plugin(path: str) -> None:
    """Execute the plugin file at ``path`` (it registers its parsers when run).

    Raises:
        FileNotFoundError: no such file.
        Exception: whatever the plugin raises while it runs.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"tool parser plugin {path!r} does not exist")
    module_name = "greenfront_tool_parser_plugin_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load tool parser plugin {path!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
