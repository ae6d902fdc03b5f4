"""The server's output parsers: which tool-call and reasoning parser classes serve, checked once.

``load_output_parsers`` runs at worker start-up with the settings (``--tool-call-parser``,
``--tool-parser-plugin``, ``--enable-auto-tool-choice``, ``--reasoning-parser``) and the
tokenizer's vocabulary, and fails the start as vLLM does: ``--enable-auto-tool-choice`` without a
parser, an unknown name, a tokenizer without the family's marker tokens.

Runs on: worker start-up; the result is immutable and read from any thread.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from text.reasoning.base import ReasoningParser, get_reasoning_parser
from text.tool_parsers.base import ToolParser
from text.tool_parsers.registry import get_tool_parser, load_plugin


class ParserSetupError(ValueError):
    """The configured parsers cannot serve (the worker does not start)."""


@dataclass(frozen=True)
class OutputParsers:
    """The parser classes of this server (None: not configured) and the vocabulary they use.

    ``tool_parser`` is set only with ``--enable-auto-tool-choice``, as in vLLM: a parser name
    alone enables nothing.
    """

    tool_parser: type[ToolParser] | None = None
    reasoning_parser: type[ReasoningParser] | None = None
    vocab: Mapping[str, int] | None = None

    @property
    def active(self) -> bool:
        return self.tool_parser is not None or self.reasoning_parser is not None


def load_output_parsers(*, enable_auto_tool_choice: bool, tool_call_parser: str,
                        tool_parser_plugin: str, reasoning_parser: str,
                        vocab: Mapping[str, int]) -> OutputParsers:
    """Resolve and check the configured parsers.

    Raises:
        ParserSetupError: the combination cannot serve (the message says why).
    """
    if enable_auto_tool_choice and not tool_call_parser:
        raise ParserSetupError("--enable-auto-tool-choice requires --tool-call-parser")
    try:
        if tool_parser_plugin:
            load_plugin(tool_parser_plugin)
        tool_cls = (get_tool_parser(tool_call_parser)
                    if enable_auto_tool_choice and tool_call_parser else None)
        reasoning_cls = get_reasoning_parser(reasoning_parser) if reasoning_parser else None
        # Built once here so a tokenizer without the markers fails the start, not a request.
        if tool_cls is not None:
            tool_cls(vocab, None)
        if reasoning_cls is not None:
            reasoning_cls(vocab, None)
    except ParserSetupError:
        raise
    except Exception as exc:  # a plugin may raise anything; the start fails with its message
        raise ParserSetupError(str(exc).strip("'\"")) from exc
    return OutputParsers(tool_cls, reasoning_cls, vocab)
