"""What the output parsers produce: tool calls, and the parts of one streamed delta.

Shared by ``text.tool_parsers`` and ``text.reasoning`` (plain data; no Falcon, no gevent).

Runs on: whatever thread renders the response (the HTTP hub while streaming).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass(slots=True)
class ToolCall:
    """One complete call: the function's name and its arguments as a JSON string.

    ``id`` is set only by formats that carry or fix the id themselves; otherwise the response
    gets a fresh ``chatcmpl-tool-…`` id.
    """

    name: str
    arguments: str
    id: str | None = None


@dataclass(slots=True)
class ExtractedToolCalls:
    """A whole output after tool parsing: the calls and the text that is not part of them."""

    calls: list[ToolCall]
    content: str | None
    #: the format says calls were made even when none could be read (DeepSeek's parsers: the
    #: content is then only the text before the calls); None: whether any call was read
    tools_called: bool | None = None

    @property
    def called(self) -> bool:
        return bool(self.calls) if self.tools_called is None else self.tools_called


@dataclass(slots=True)
class ToolCallDelta:
    """One piece of a streamed call: the first carries ``id``/``name``, later ones
    ``arguments`` fragments (vLLM's ``DeltaToolCall``)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None


@dataclass(slots=True)
class DeltaParts:
    """What one text delta adds to a choice: content, reasoning and tool-call pieces."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCallDelta] = field(default_factory=list)

    def empty(self) -> bool:
        return self.content is None and self.reasoning is None and not self.tool_calls


def tag_overlap(text: str, tag: str) -> int:
    """Length of the longest proper prefix of ``tag`` that ``text`` ends with (the part of a
    marker that may still be arriving, held back from content)."""
    # PERF: only positions holding the tag's first character can start an overlap (usually
    # none in the last few characters), instead of len(tag) endswith calls per delta.
    at = text.find(tag[0], max(0, len(text) - len(tag) + 1))
    while at != -1:
        if tag.startswith(text[at:]):
            return len(text) - at
        at = text.find(tag[0], at + 1)
    return 0


def is_json(text: str) -> bool:
    """``text`` is one complete JSON value."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


#: Why the gpt-oss (harmony) parsers are not built: the maintained package for the format needs a
#: tokenizer vocabulary that no package ships and it downloads at run time.
HARMONY_UNAVAILABLE = (
    "the harmony format (gpt-oss) needs the openai-harmony package's o200k_harmony tiktoken "
    "vocabulary, which no package ships and which it downloads at run time; greenfront runs "
    "without internet")
