"""The request checks past the JSON types, stated as JSON Schema keywords for /openapi.json.

The field tables give each property its JSON type (``resources.common.fields``); the semantic
checks that follow (``resources.common.sampling_rules``, ``resources.completions.validate``,
``resources.chat.validate``) refuse more: ``n`` below 1, ``top_p`` outside (0, 1], an empty
prompt or message list. Publishing those bounds lets clients and fuzzers (schemathesis in
``make fuzz``) draw bodies that get past them, instead of bodies that all end in the same 400.
Each entry mirrors one check of those modules; where a bound depends on settings (``n``'s
maximum, the vocabulary) it is left out.

Runs on: the HTTP hub (once, when /openapi.json is first built).
"""
from __future__ import annotations

import copy
from typing import Any

#: property -> keywords added to its non-null alternatives, for every request schema carrying it.
SAMPLING_BOUNDS: dict[str, dict[str, Any]] = {
    "n": {"minimum": 1},                                          # "n must be at least 1"
    "presence_penalty": {"minimum": -2.0, "maximum": 2.0},        # "must be in [-2, 2]"
    "frequency_penalty": {"minimum": -2.0, "maximum": 2.0},
    "repetition_penalty": {"exclusiveMinimum": 0.0},              # "must be greater than zero"
    "temperature": {"minimum": 0.0},
    "top_p": {"exclusiveMinimum": 0.0, "maximum": 1.0},           # "top_p must be in (0, 1]"
    "top_k": {"minimum": -1},
    "min_p": {"minimum": 0.0, "maximum": 1.0},
    "max_tokens": {"minimum": 1},                                 # "max_tokens must be at least 1"
    "max_completion_tokens": {"minimum": 1},
    "min_tokens": {"minimum": 0},
    "stop": {"minLength": 1, "items": {"minLength": 1}},          # "stop cannot contain an empty string"
    "bad_words": {"items": {"minLength": 1}},                     # "bad_words cannot contain an empty string"
    "stream_interval": {"minimum": 1},
}
#: Fields the server refuses unless absent or null: "… is not supported by this server
#: (greenfront)" (``sampling_rules.refuse_unimplemented``, generate's checks).
REFUSED: dict[str, dict[str, Any]] = {
    **{name: {"type": "null"} for name in ("prompt_embeds", "logits_processors", "features",
                                           "content_parts", "reasoning_ended",
                                           "reasoning_parser_kwargs")},
}
#: Per request schema: (properties made required, extra keywords per property).
REQUEST_CHECKS: dict[str, tuple[tuple[str, ...], dict[str, dict[str, Any]]]] = {
    # "Either prompt or prompt_embeds must be provided and non-empty"; prompt_embeds is refused.
    "CompletionRequest": (("prompt",), {"prompt": {"minLength": 1, "minItems": 1}}),
    # "Cannot apply chat template to an empty conversation"; "`tools` must not be an empty array".
    "ChatCompletionRequest": ((), {"messages": {"minItems": 1}, "tools": {"minItems": 1}}),
}
_KEYWORD_TYPES = {"minimum": ("integer", "number"), "maximum": ("integer", "number"),
                  "exclusiveMinimum": ("integer", "number"), "minLength": ("string",),
                  "minItems": ("array",), "items": ("array",)}


def with_checks(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of the request schema ``name`` narrowed by the checks the server makes."""
    out = copy.deepcopy(schema)
    properties = out.get("properties", {})
    required, extra = REQUEST_CHECKS.get(name, ((), {}))
    for prop, keywords in {**SAMPLING_BOUNDS, **extra}.items():
        if prop in properties:
            properties[prop] = _narrowed(properties[prop], keywords, nullable=prop not in required)
    for prop, only in REFUSED.items():
        if prop in properties:
            default = properties[prop].get("default")
            properties[prop] = {**only, **({"default": default} if "default" in properties[prop]
                                           else {})}
    for prop, value in properties.items():  # nested request objects (generate's sampling_params)
        if "properties" in value:
            properties[prop] = with_checks(value.get("title", ""), value)
    if required:
        out["required"] = list(dict.fromkeys([*out.get("required", []), *required]))
    return out


def _narrowed(prop: dict[str, Any], keywords: dict[str, Any], nullable: bool) -> dict[str, Any]:
    """``prop`` with ``keywords`` applied to each alternative of the type they constrain (a
    keyword for another type is meaningless there); the null alternative dropped unless
    ``nullable``."""
    if "anyOf" in prop:
        members = [_narrowed(m, keywords, nullable) for m in prop["anyOf"]
                   if nullable or m.get("type") != "null"]
        rest = {k: v for k, v in prop.items() if k != "anyOf"}
        if not nullable:
            rest.pop("default", None)
        return {**rest, "anyOf": members} if len(members) != 1 else {**rest, **members[0]}
    kind = prop.get("type")
    for keyword, value in keywords.items():
        if kind not in _KEYWORD_TYPES[keyword]:
            continue
        if keyword == "items":
            prop["items"] = _narrowed(prop.get("items", {}), value, nullable=True)
        else:
            prop[keyword] = value
    return prop
