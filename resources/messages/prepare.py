"""``POST /v1/messages`` and ``/v1/messages/count_tokens``: body -> chat pipeline.

The Anthropic fields are checked first (``types``: OpenAI-shaped 400s, as vLLM's request
validation answers); everything after is the handler's, answered in Anthropic's envelope (the
resource marks those errors). Two facts about the served chat template are probed once per
template, as vLLM probes them at start-up (docs/messages.md §3): whether it needs the system
message first (then inline system messages are merged into the leading one), and which
``reasoning_effort`` ``thinking: {"type": "disabled"}`` maps to ("none", or "low" when the
template refuses or ignores "none").

Called by: ``resources.messages.resource``.
Runs on: request pool threads.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
import jinja2.sandbox

from base.errors import ApiError, InvalidRequest, in_envelope
from base.jsonio import dumps
from resources.chat.convert import (chat_prompt_ids, parse_chat, prepare_parsed_chat,
                                    render_prompt)
from streaming.prepared import PreparedRequest
from resources.messages import types
from resources.messages.convert import chat_body
from resources.messages.validate import EFFORTS
from runtime.serving_context import ServingContext


@lru_cache(maxsize=8)
def needs_system_first(source: str | None) -> bool:
    """Whether a template refuses a system message after the first turn: rendered bare (no
    globals, as vLLM's probe renders it) over system, user, system, user."""
    if not source:
        return True
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    turns = [{"role": r, "content": "t"} for r in ("system", "user", "system", "user")]
    try:
        env.from_string(source).render(messages=turns, add_generation_prompt=False)
    except jinja2.TemplateError:
        return True
    return False


@dataclass
class _Probe:
    """The chat prompt fields ``render_prompt`` reads, for one probe message."""

    reasoning_effort: str
    messages: Any = None
    tools: Any = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    documents: Any = None
    chat_template: Any = None
    chat_template_kwargs: Any = None


_EFFORT_PROBES: dict[int, tuple[ServingContext, str]] = {}


def _probe_render(ctx: ServingContext, effort: str) -> str | None:
    probe = _Probe(reasoning_effort=effort, messages=[{"role": "user", "content": "Hi"}])
    try:
        return render_prompt(ctx, probe)[1]
    except ApiError:
        return None


def disabled_thinking_effort(ctx: ServingContext) -> str:
    """The ``reasoning_effort`` of ``thinking.type == "disabled"``: "low" when the template
    fails on "none" or renders it as it renders a real effort, else "none". Kept per serving
    context (a benign race: two threads may both probe and store the same answer)."""
    known = _EFFORT_PROBES.get(id(ctx))
    if known is not None and known[0] is ctx:
        return known[1]
    none = _probe_render(ctx, "none")
    answer = "none"
    if none is None or any(_probe_render(ctx, e) == none for e in EFFORTS):
        answer = "low"
    if len(_EFFORT_PROBES) > 16:
        _EFFORT_PROBES.clear()
    _EFFORT_PROBES[id(ctx)] = (ctx, answer)
    return answer


def _chat_body_of(f: types.CountTokensRequest, ctx: ServingContext, effort: str) -> dict:
    """``effort``: ``--anthropic-disabled-thinking-effort`` ("auto": probed)."""
    template = ctx.chat_template
    disabled = "none"
    if f.thinking is not None and f.thinking["type"] == "disabled":
        disabled = disabled_thinking_effort(ctx) if effort == "auto" else effort
    return chat_body(f, merge_inline=needs_system_first(template.source if template else None),
                     disabled_effort=disabled)


def _parsed(body: Any, table: list, struct: type) -> Any:
    try:
        return types.parse_request(body, table, struct)
    except ApiError as exc:
        raise in_envelope(exc, "openai")


def prepare_messages(body: Any, ctx: ServingContext, *, header_request_id: str | None = None,
                     disabled_effort: str = "auto") -> PreparedRequest:
    """A ``/v1/messages`` body as the chat pipeline's ``PreparedRequest``
    (``disabled_effort``: ``--anthropic-disabled-thinking-effort``).

    Raises:
        RequestValidationError: the Anthropic fields' errors (OpenAI's envelope).
        ApiError: chat's own errors for the converted request (the handler's, in Anthropic's).
    """
    f = _parsed(body, types.fields(ctx.max_stop_strings), types.MessagesRequest)
    if f.ec_transfer_params is not None:
        raise InvalidRequest("ec_transfer_params is not supported: greenfront has no "
                             "encoder-cache transfer.", param="ec_transfer_params")
    chat = parse_chat(_chat_body_of(f, ctx, disabled_effort), ctx)
    return prepare_parsed_chat(chat, ctx, header_request_id=header_request_id)


def count_tokens(body: Any, ctx: ServingContext, disabled_effort: str = "auto") -> bytes:
    """The ``/v1/messages/count_tokens`` answer: the rendered prompt's length."""
    f = _parsed(body, types.COUNT_FIELDS, types.CountTokensRequest)
    chat = parse_chat(_chat_body_of(f, ctx, disabled_effort), ctx)
    count = len(chat_prompt_ids(chat, ctx))
    return dumps({"input_tokens": count,
                  "context_management": {"original_input_tokens": count}})
