"""The reasoning-parser interface: split a model's thinking from its answer, whole or streamed.

A family subclasses ``ReasoningParser`` and registers it by vLLM's ``--reasoning-parser`` name.
One instance parses one choice (the streaming state lives on it). ``ThinkTagParser`` implements
the common ``<start>…<end>`` formats; ``ended`` tells the chat pipeline when the thought is over
(then the tool parser takes the rest). Plain code over text deltas: no Falcon, no gevent.

Runs on: the thread that renders the response (the HTTP hub while streaming).
"""
from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

from text.parsed import HARMONY_UNAVAILABLE, DeltaParts
from text.parser_registry import ParserRegistry


class ReasoningParser:
    """Base of every reasoning parser.

    Class attributes:
        name: the registry name.
        required_tokens: tokens the vocabulary must contain (vLLM refuses to start without).
        grammar_based: vLLM 0.32 implements it on its grammar engine (see
            ``text.tool_parsers.base.ToolParser.grammar_based``).
    """

    name: ClassVar[str] = ""
    required_tokens: ClassVar[tuple[str, ...]] = ()
    grammar_based: ClassVar[bool] = False
    #: the output is detokenized with ``skip_special_tokens`` false (the thought's markers are
    #: special tokens the parser reads in the text), as vLLM's parser asks
    keep_special_tokens: ClassVar[bool] = False

    def __init__(self, vocab: Mapping[str, int],
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        missing = [t for t in self.required_tokens if t not in vocab]
        if missing:
            raise ValueError(f"reasoning parser {self.name!r} needs the tokens "
                             f"{', '.join(missing)} in the tokenizer's vocabulary")
        self.vocab = vocab
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        #: the thought is over (streaming): what follows is content for the tool parser
        self.ended = False

    def prompt_ends_reasoning(self, prompt_ids: Sequence[int]) -> bool:
        """True when the prompt itself closes the thought (generation starts with content)."""
        return False

    def extract(self, text: str) -> tuple[str | None, str | None]:
        """(reasoning, content) of a finished output."""
        raise NotImplementedError

    def feed(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        """One delta while the thought runs. Sets ``ended`` on the delta that closes it; the
        returned ``content`` is then the text after the marker (None when there is none)."""
        raise NotImplementedError

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """Reasoning tokens of an output (``completion_tokens_details.reasoning_tokens``)."""
        return 0

    def flush(self) -> DeltaParts | None:
        """What the parser still holds when the output ends inside the thought."""
        return None

    def content_ids(self, delta_ids: Sequence[int]) -> list[int]:
        """The ids of the delta that ended the thought which belong to the content (the tool
        parsers that read marker ids need them when one delta holds both)."""
        return []


class ThinkTagParser(ReasoningParser):
    """``<think>…</think>``-style thoughts, where the model may omit the opening tag.

    Observable behaviour of vLLM 0.32's base thinking parser, restated: the whole output
    before the end marker (an opening marker dropped) is reasoning, all of it when the output
    ends inside the thought; the content after the marker is None when empty. Streaming
    classifies each delta by the marker token ids it carries; a delta that is only a marker
    shows nothing. Reasoning tokens are counted between explicit start and end markers only.
    """

    start_token: ClassVar[str] = "<think>"
    end_token: ClassVar[str] = "</think>"

    required_tokens = (start_token, end_token)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.required_tokens = (cls.start_token, cls.end_token)

    def __init__(self, vocab, chat_template_kwargs=None) -> None:
        super().__init__(vocab, chat_template_kwargs)
        self.start_id = vocab[self.start_token]
        self.end_id = vocab[self.end_token]

    def prompt_ends_reasoning(self, prompt_ids: Sequence[int]) -> bool:
        for token in reversed(prompt_ids):
            if token == self.start_id:
                return False
            if token == self.end_id:
                return True
        return False

    def extract(self, text: str) -> tuple[str | None, str | None]:
        before, marker, after = text.partition(self.start_token)
        text = after if marker else before
        if self.end_token not in text:
            return text, None
        reasoning, _, content = text.partition(self.end_token)
        return reasoning, content or None

    def feed(self, delta_text: str, delta_ids: Sequence[int]) -> DeltaParts | None:
        if self.end_id in delta_ids:
            self.ended = True
        if len(delta_ids) == 1 and delta_ids[0] in (self.start_id, self.end_id):
            return None
        text = delta_text
        if self.start_id in delta_ids:
            text = text[text.find(self.start_token) + len(self.start_token):]
        if self.end_id in delta_ids:
            cut = text.find(self.end_token)
            after = text[cut + len(self.end_token):]
            return DeltaParts(reasoning=text[:cut], content=after or None)
        return DeltaParts(reasoning=text)

    def content_ids(self, delta_ids: Sequence[int]) -> list[int]:
        ids = list(delta_ids)
        return ids[ids.index(self.end_id) + 1:] if self.end_id in ids else []

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        count = depth = 0
        for token in token_ids:
            if token == self.start_id:
                depth += 1
            elif token == self.end_id:
                depth = max(0, depth - 1)
            elif depth:
                count += 1
        return count


# -- registry ------------------------------------------------------------------------------------

#: vLLM's reasoning parser name -> the module of ``text.reasoning`` that registers it.
BUILTIN: dict[str, str] = {
    "deepseek_r1": "deepseek_r1",
    "qwen3": "qwen3",
    "glm45": "glm45",
    "kimi_k2": "kimi_k2",
    "minimax_m2": "minimax_m2",
    "mistral": "mistral",
    "granite": "granite",
}

_PARSERS: ParserRegistry[type[ReasoningParser]] = ParserRegistry(
    "reasoning parser", ReasoningParser, "text.reasoning", BUILTIN,
    unavailable={"openai_gptoss": HARMONY_UNAVAILABLE})

#: Class decorator: make a ReasoningParser subclass the reasoning parser called ``name``.
register_reasoning_parser = _PARSERS.register
#: The class registered as ``name`` (KeyError, listing the known names, when none is).
get_reasoning_parser = _PARSERS.get
