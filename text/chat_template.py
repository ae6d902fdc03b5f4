"""Chat prompt rendering: OpenAI messages -> the prompt string the model's Jinja template writes.

Owns: `ChatTemplate`, which reproduces what vLLM 0.32 does before tokenizing a chat prompt
(docs/text-parity.md §4.2): it turns request messages into template messages ("string" content format:
text parts joined with "\n"), parses assistant tool-call arguments into dicts, maps `developer`
to `system` when the template does not know that role, and renders like Hugging Face
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

from text.content_parts import part_error

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

# Content-part types whose payload is text, and the key holding it.
_TEXT_PART_KEYS = {
    "text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal",
    "thinking": "thinking",
}
# Parts of these types with a null payload are skipped rather than rejected.
_SKIP_IF_NULL = frozenset({"text", "refusal"})
_MEDIA_PART_TYPES = frozenset({
    "image_url", "input_image", "image_embeds", "image_pil", "audio_url", "input_audio",
    "audio_embeds", "video_url", "video_embeds", "prompt_embeds",
})
_MEDIA_KEYS = ("image_url", "image_pil", "image_embeds", "audio_embeds", "video_embeds",
               "prompt_embeds", "audio_url", "input_audio", "video_url", "tool_reference")
_SUPPORTED_PART_TYPES = sorted(_TEXT_PART_KEYS.keys() | _MEDIA_PART_TYPES | {"tool_reference"})
# Claude Code puts a per-request attribution line first in its system prompt; vLLM drops it.
_BILLING_HEADER = "x-anthropic-billing-header"


class ChatTemplateError(ValueError):
    """A chat prompt could not be rendered; `str(err)` is the client-facing message.

    `parameter` names the offending request field when vLLM reports one.
    """

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


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


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: Any = None, sort_keys: bool = False) -> str:
    # Jinja's own tojson HTML-escapes; templates expect plain json.dumps output.
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
            self.variables = frozenset(jinja2.meta.find_undeclared_variables(env.parse(source)))
        except jinja2.TemplateError as e:
            raise ChatTemplateError(str(e)) from e
        self.source = source
        self.knows_developer = '"developer"' in source or "'developer'" in source


@functools.lru_cache(maxsize=32)
def _compile(source: str) -> _Compiled:
    return _Compiled(source)


# -- messages -------------------------------------------------------------------------------------


def _part_text(part: Mapping[str, Any]) -> Any:
    """The payload of one content part object (not checked to be a string), None to skip it;
    raises for parts a text model rejects."""
    part_type = part.get("type")
    if part_type is None or part.get("uuid") is not None:
        for key in _MEDIA_KEYS:
            if key in part:
                part_type = key
                break
        else:
            raise ChatTemplateError("Missing 'type' field in multimodal part.", parameter="type")
    if not isinstance(part_type, str):
        raise ChatTemplateError("Invalid 'type' field in multimodal part.", parameter="type")
    if part_type in _TEXT_PART_KEYS:
        text = part.get(_TEXT_PART_KEYS[part_type])
        if text is None and part_type in _SKIP_IF_NULL:
            return None
        return text
    if part_type == "tool_reference":
        return part.get("name")
    if part_type in _MEDIA_PART_TYPES:
        # NOTE: greenfront serves text-only models; vLLM would fail later in its media parser.
        raise ChatTemplateError(
            f"Content part type {part_type!r} is not supported by this text-only model.",
            parameter="type")
    raise ChatTemplateError(
        f"Unsupported chat content part type: {part_type!r}. "
        f"Supported types: {', '.join(_SUPPORTED_PART_TYPES)}.",
        parameter="type")


def _strip_billing_header(parts: list[Any]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        if isinstance(part, str):
            text = part
        elif isinstance(part, Mapping) and part.get("type") == "text":
            text = part.get("text")
        else:
            text = None
        if not (isinstance(text, str) and text.startswith(_BILLING_HEADER)):
            out.append(part)
            continue
        rest = text.partition("\n")[2]
        if rest:
            out.append(rest if isinstance(part, str) else {**part, "text": rest})
    return out


def _content_text(role: str, content: Any) -> str:
    if content is None:
        parts: list[Any] = []
    elif isinstance(content, str):
        parts = [content]
    elif isinstance(content, Mapping) and content:
        # vLLM iterates an object as its keys, none of which is a part object.
        raise ChatTemplateError(part_error(role, 0, next(iter(content))) or
                                "Message content must be a string or a list of parts.")
    else:
        parts = list(content)
    if role == "system":
        parts = _strip_billing_header(parts)
    texts = []
    for index, part in enumerate(parts):
        text = _part_text(part) if isinstance(part, Mapping) else part
        if not isinstance(part, Mapping | str) or (text is not None and not isinstance(text, str)):
            # Not an object, or a text payload that is no string: vLLM's pydantic 400.
            raise ChatTemplateError(part_error(role, index, part) or (
                f"Content part {index} must be a string or an object with a string payload."))
        if text:  # empty parts are dropped, not joined: ["", "no"] -> "no"
            texts.append(text)
    return "\n".join(texts)


def _normalize_tool_calls(message: dict[str, Any]) -> None:
    """Assistant tool-call arguments become dicts, as tool-use templates expect."""
    tool_calls = message.get("tool_calls")
    if not isinstance(tool_calls, list):
        return
    if not tool_calls:
        # An empty list would push templates onto their tool-call path for nothing.
        del message["tool_calls"]
        return
    for item in tool_calls:
        if not isinstance(item, dict):
            raise ChatTemplateError("assistant tool_calls entries must be objects.",
                                    parameter="tool_calls")
        function = item.get("function")
        if item.get("type", "function") != "function" or not isinstance(function, dict):
            raise ChatTemplateError(
                "chat completions only support assistant tool_calls of type 'function'.",
                parameter="tool_calls")
        arguments = function.get("arguments")
        if isinstance(arguments, dict) and arguments:
            continue
        parsed: Any = None
        if arguments and isinstance(arguments, str):
            try:
                parsed = json.loads(arguments)
            except json.JSONDecodeError:
                # Malformed history must not make every later turn fail: use {}.
                parsed = None
        function["arguments"] = parsed if isinstance(parsed, dict) else {}


def parse_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Request messages (validated OpenAI dicts) -> the message dicts the template sees.

    The caller's objects are not modified.
    """
    conversation: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        out: dict[str, Any] = {"role": role, "content": _content_text(role, message.get("content"))}
        if role == "assistant":
            if message.get("tool_calls") is not None:
                out["tool_calls"] = copy.deepcopy(list(message["tool_calls"]))
            reasoning = message.get("reasoning")
            if reasoning is not None:
                out["reasoning"] = reasoning
                out["reasoning_content"] = reasoning
        elif role == "tool" and "tool_call_id" in message:
            out["tool_call_id"] = message["tool_call_id"]
        if isinstance(message.get("name"), str):
            out["name"] = message["name"]
        if isinstance(message.get("task"), str):
            out["task"] = message["task"]
        if role == "developer":
            out["tools"] = message.get("tools")
        if role == "assistant":
            _normalize_tool_calls(out)
        conversation.append(out)
    return conversation


def _developer_as_system(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`developer` -> `system`, then all system messages merged into one at the front if there
    is more than one or one that is not first (templates often insist on a leading system)."""
    converted = []
    for msg in conversation:
        if msg["role"] == "developer":
            msg = {k: v for k, v in msg.items() if k != "tools"}
            msg["role"] = "system"
        converted.append(msg)
    system_texts: list[str] = []
    others: list[dict[str, Any]] = []
    merge = False
    for i, msg in enumerate(converted):
        if msg["role"] != "system":
            others.append(msg)
            continue
        if i > 0 or system_texts:
            merge = True
        content = msg.get("content", "")
        if isinstance(content, list):
            content = "\n".join(
                p["text"] if isinstance(p, dict) else p
                for p in content if (isinstance(p, dict) and "text" in p) or isinstance(p, str))
        if content:
            system_texts.append(content)
    if not merge:
        return converted
    return [{"role": "system", "content": "\n\n".join(system_texts)}, *others]


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
            conversation = _developer_as_system(conversation)
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
