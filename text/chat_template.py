"""Chat prompt rendering: OpenAI messages -> the prompt string the model's Jinja template writes.

Owns: `ChatTemplate`, which reproduces what vLLM 0.32 does before tokenizing a chat prompt
(docs/text-parity.md §4.2): it turns request messages into template messages
(``text.chat_messages``), maps `developer` to `system` when the template does not know that
role, and renders like Hugging Face
`apply_chat_template(tokenize=False)` (sandboxed Jinja with trim/lstrip blocks, loop controls, a
pass-through `{% generation %}` tag, a non-escaping `tojson`, `raise_exception`, `strftime_now`,
and the `continue_final_message` marker). Every failure is a `ChatTemplateError` carrying the
message vLLM puts in its 400 response.

Called by the chat-completions and tokenize resources; the result is then tokenized with
`add_special_tokens=False` by default. Runs on: request pool threads (pure Python; a huge
conversation costs tens of ms, which is why it stays off the hub).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.meta
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from text.chat_messages import ChatTemplateError, developer_as_system, parse_messages

EMPTY_CONVERSATION_MESSAGE = (
    "Cannot apply chat template to an empty conversation. Provide at least one message."
)
INCOMPATIBLE_FLAGS_MESSAGE = (
    "continue_final_message and add_generation_prompt are not compatible. Use "
    "continue_final_message when you want the model to continue the final message, and "
    "add_generation_prompt when you want to add a header that will prompt it to start a new "
    "assistant message instead."
)
# Appended to the final message before rendering; the output is cut where it reappears.
CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "

# Request kwargs that Hugging Face's apply_chat_template consumes itself: accepted by vLLM's
# filter but never visible to the template.
_HF_CALL_PARAMETERS = frozenset({
    "conversation", "tools", "documents", "chat_template", "add_generation_prompt",
    "continue_final_message", "tokenize", "padding", "truncation", "max_length",
    "return_tensors", "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs",
})
_REJECTED_KWARGS = frozenset({"chat_template", "tokenize"})

# -- Jinja environment ----------------------------------------------------------------------------


class _GenerationBlock(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` renders its body unchanged.

    Templates use it to mark assistant text for training masks; prompts only need it to parse.
    """

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


class DumpedOnce(dict):
    """A dict whose plain ``tojson`` text is made once and then kept: the tools that an agent
    sends with every turn (``resources.chat.convert.tool_dicts`` keeps them per thread).
    Whoever holds one must not change it (templates cannot: the sandbox is immutable).

    Runs on: the thread that made it (the text is cached on first use, by that thread).
    """

    __slots__ = ("_json",)

    def json(self) -> str:
        try:
            return self._json
        except AttributeError:
            pass
        self._json = text = json.dumps(self, ensure_ascii=False)
        return text


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: Any = None, sort_keys: bool = False) -> str:
    # Jinja's own tojson HTML-escapes; templates expect plain json.dumps output.
    if (value.__class__ is DumpedOnce and not ensure_ascii and indent is None
            and separators is None and not sort_keys):
        return value.json()
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _raise_exception(message: Any) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[_GenerationBlock, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


class _Compiled:
    __slots__ = ("source", "template", "variables", "knows_developer")

    def __init__(self, source: str) -> None:
        env = _environment()
        try:
            self.template = env.from_string(source)
            # PERF: Jinja keeps a template's globals as a ChainMap over the environment's, and
            # copies them into every render's context through ChainMap's Python-level
            # iteration: 24 us of the 38 us a one-message render took. Nothing changes the
            # globals after compiling, so a plain dict gives the same names (~1 us).
            self.template.globals = dict(self.template.globals)
            self.variables = frozenset(jinja2.meta.find_undeclared_variables(env.parse(source)))
        except jinja2.TemplateError as e:
            raise ChatTemplateError(str(e)) from e
        self.source = source
        self.knows_developer = '"developer"' in source or "'developer'" in source


@functools.lru_cache(maxsize=32)
def _compile(source: str) -> _Compiled:
    return _Compiled(source)


# -- rendering ------------------------------------------------------------------------------------


class ChatTemplate:
    """A compiled chat template plus the special-token variables it sees. Thread-safe."""

    def __init__(self, template_str: str, special_tokens: Mapping[str, str]) -> None:
        """Compile `template_str` (cached by string). `special_tokens` maps `bos_token`,
        `eos_token`, ... to their text. Raises ChatTemplateError on a syntax error."""
        self._compiled = _compile(template_str)
        self._special_tokens = dict(special_tokens)

    @property
    def source(self) -> str:
        return self._compiled.source

    @property
    def variables(self) -> frozenset[str]:
        """Names the template reads from its context (used to filter request kwargs)."""
        return self._compiled.variables

    def render(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
               continue_final_message: bool = False, tools: list[dict[str, Any]] | None = None,
               documents: list[dict[str, Any]] | None = None,
               extra_kwargs: Mapping[str, Any] | None = None) -> str:
        """Render request `messages` to the prompt string (HF `tokenize=False` output).

        `extra_kwargs` is the merged `chat_template_kwargs` (server default, then request);
        `chat_template`/`tokenize` in it are rejected, names the template never reads are
        dropped, and the explicit arguments here win over same-named entries.
        """
        return self.render_conversation(
            parse_messages(messages), add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message, tools=tools, documents=documents,
            extra_kwargs=extra_kwargs)

    def render_conversation(self, conversation: list[dict[str, Any]], *,
                            add_generation_prompt: bool = True,
                            continue_final_message: bool = False,
                            tools: list[dict[str, Any]] | None = None,
                            documents: list[dict[str, Any]] | None = None,
                            extra_kwargs: Mapping[str, Any] | None = None) -> str:
        """`render` for messages already converted by `parse_messages`."""
        compiled = self._compiled
        kwargs = self._template_kwargs(extra_kwargs)
        if any(m.get("role") == "developer" for m in conversation) and not compiled.knows_developer:
            conversation = developer_as_system(conversation)
        if not conversation:
            raise ChatTemplateError(EMPTY_CONVERSATION_MESSAGE)
        if continue_final_message and add_generation_prompt:
            raise ChatTemplateError(INCOMPATIBLE_FLAGS_MESSAGE)
        if documents is not None and any(not isinstance(d, dict) for d in documents):
            raise ChatTemplateError("Documents should be a list of dicts with 'title' and 'text' keys!")

        final_text = None
        if continue_final_message:
            conversation, final_text = self._mark_final_message(conversation)

        context = {**self._special_tokens, **kwargs}
        for name in ("messages", "tools", "documents", "add_generation_prompt"):
            if name in context:
                raise ChatTemplateError(
                    f"render() got multiple values for keyword argument '{name}'")
        context.update(messages=conversation, tools=tools, documents=documents,
                       add_generation_prompt=add_generation_prompt)
        try:
            rendered = compiled.template.render(**context)
        except ChatTemplateError:
            raise
        except Exception as e:  # noqa: BLE001 - vLLM turns any template failure into a 400
            raise ChatTemplateError(_error_reason(e)) from e

        if final_text is not None:
            rendered = self._cut_at_tag(rendered, final_text)
        return rendered

    def _template_kwargs(self, extra_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
        if not extra_kwargs:
            return {}
        rejected = _REJECTED_KWARGS & extra_kwargs.keys()
        if rejected:
            raise ChatTemplateError(
                f"Found unexpected chat template kwargs from request: {set(rejected)}")
        variables = self._compiled.variables
        return {k: v for k, v in extra_kwargs.items()
                if k in variables and k not in _HF_CALL_PARAMETERS}

    def _mark_final_message(
        self, conversation: list[dict[str, Any]],
    ) -> tuple[list[dict[str, Any]], str]:
        conversation = copy.deepcopy(conversation)
        final = conversation[-1].get("content")
        if final is None:
            raise ChatTemplateError(
                'continue_final_message is set but the final message has no "content" to continue!')
        if "content" not in self._compiled.source:
            raise ChatTemplateError(
                'continue_final_message is set to "content" but this is not an accepted field '
                "in the chat_template")
        if isinstance(final, (list, tuple)):
            for block in reversed(final):
                if "text" in block:
                    text = block["text"]
                    block["text"] = text + CONTINUE_TAG
                    return conversation, text
            raise ChatTemplateError(
                "continue_final_message is set but we could not find any text to continue in the "
                "final message!")
        conversation[-1]["content"] = final + CONTINUE_TAG
        return conversation, final

    @staticmethod
    def _cut_at_tag(rendered: str, final_text: str) -> str:
        tag = CONTINUE_TAG.strip()
        if final_text.strip() not in rendered or tag not in rendered:
            raise ChatTemplateError(
                "continue_final_message is set but the final message does not appear in the chat "
                "after applying the chat template! This can happen if the chat template deletes "
                "portions of the final message. Please verify the chat template and final message "
                "in your chat to ensure they are compatible."
                f"Final message to continue: {final_text.strip()}\nRendered chat:\n{rendered}")
        at = rendered.rindex(tag)
        if rendered[at:at + len(CONTINUE_TAG)] == CONTINUE_TAG:
            return rendered[:at]
        # The template trimmed the tag's trailing space, so trim what precedes it too.
        return rendered[:at].rstrip()


def _error_reason(exc: BaseException) -> str:
    """The most specific message in an exception chain: the first Jinja error, else `exc`."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, jinja2.TemplateError):
            return str(current)
        current = current.__cause__ or current.__context__
    return str(exc)
