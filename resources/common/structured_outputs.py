"""Structured-output constraints: the checks vLLM 0.32 runs before a request reaches the engine,
and the wire map with the backend the deployment is configured for.

Owns: which backend a request names (``_backend``/``_backend_was_auto``, from
``--structured-outputs-config``'s ``backend``: with ``auto`` vLLM picks xgrammar unless the
constraint uses something xgrammar cannot do, then guidance), ``choice`` rewritten as the
grammar vLLM hands xgrammar, and the cheap checks that turn bad constraints into 400s: empty
strings and lists, nesting depth, ``json_object: false``, NUL in a regex, regexes Python's
``re`` cannot compile or that use look-around/back-references (neither xgrammar nor guidance has
them), JSON schemas that fail the JSON Schema meta-schema, and malformed ``structural_tag``s.

Messages: vLLM's own where the check is vLLM's (empty values, nesting, ``json_object``); for a
schema or regex the backend refuses, vLLM's prefix ("Grammar error: " for guidance and for
``auto``, which falls back to guidance after xgrammar refused; xgrammar's "Failed to transform
… into a grammar: ") followed by greenfront's own description of the fault (vLLM's text after
the prefix is the backend library's). What cannot be checked without a grammar compiler
(EBNF/Lark grammars, the inner structure of a structural tag's ``format``) goes to the engine
as vLLM's frontend sends it.

Called by: ``resources.common.sampling_rules.structured_outputs_for``, ``resources.chat``.
Runs on: request pool threads (pure functions; the meta-schema validator is built once).
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from base.errors import InvalidRequest

MAX_NESTING = 64
#: Structural tags may wrap schemas in this many more levels (vLLM's allowance).
STRUCTURAL_TAG_EXTRA_NESTING = 16
#: The ``format.type`` names xgrammar 0.2's structural tags know.
STRUCTURAL_FORMAT_TYPES = frozenset({
    "const_string", "json_schema", "any_text", "token", "exclude_token", "any_tokens",
    "grammar", "regex", "sequence", "or", "tag", "triggered_tags", "token_triggered_tags",
    "tags_with_separator", "optional", "plus", "star", "repeat", "dispatch", "token_dispatch",
    "qwen_xml_parameter", "structural_tag"})
#: String formats xgrammar's JSON-schema converter implements; others make vLLM pick guidance.
XGRAMMAR_STRING_FORMATS = frozenset({
    "email", "date", "time", "date-time", "duration", "ipv4", "ipv6", "hostname", "uuid",
    "uri", "uri-reference", "uri-template", "json-pointer", "relative-json-pointer"})
_LOOKAROUND = re.compile(r"\(\?<?[=!]")
_BACKREFERENCE = re.compile(r"(?<!\\)(?:\\\\)*\\[1-9]")
_UNICODE_CLASS = re.compile(r"(?<!\\)(?:\\\\)*\\[pP]")


class _GuidanceOnly(Exception):
    """The constraint is fine but xgrammar cannot compile it (``auto`` then names guidance)."""


def _nested_deeper_than(value: Any, limit: int) -> bool:
    level = [value]
    for _ in range(limit):
        level = [child for node in level
                 for child in (node.values() if isinstance(node, dict) else node)
                 if isinstance(child, (dict, list))]
        if not level:
            return False
    return True


def check_nesting(spec: Any, *, structural_tag: bool = False) -> None:
    """vLLM's depth limit on schemas (and structural tags, which may wrap them)."""
    limit = MAX_NESTING + (STRUCTURAL_TAG_EXTRA_NESTING if structural_tag else 0)
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError:
            return
    if isinstance(spec, (dict, list)) and spec and _nested_deeper_than(spec, limit):
        raise InvalidRequest("The JSON schema is nested too deeply: objects and arrays may nest "
                             f"at most {MAX_NESTING} levels")


@lru_cache(maxsize=1)
def _meta_validator() -> Any:
    from jsonschema import Draft202012Validator  # imported on first use: ~30 ms
    return Draft202012Validator(Draft202012Validator.META_SCHEMA)


def schema_fault(schema: Any) -> str | None:
    """Why ``schema`` is not a JSON schema (the meta-schema's first complaint), or None."""
    if isinstance(schema, bool):
        return None
    if not isinstance(schema, dict):
        return f"a JSON schema must be an object or a boolean, got {type(schema).__name__}"
    error = next(iter(_meta_validator().iter_errors(schema)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{error.message}" + (f" (at {where})" if where else "")


def _types(node: dict) -> set[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    return {k for k in kind if isinstance(k, str)} if isinstance(kind, list) else set()


def _bounded_pattern(node: Any) -> bool:
    return (isinstance(node, dict) and ("pattern" in node or "format" in node)
            and ("minLength" in node or "maxLength" in node))


def _xgrammar_cannot(node: dict) -> bool:
    """One schema node uses a feature xgrammar 0.2 does not implement (vLLM's list)."""
    kinds = _types(node)
    if kinds & {"integer", "number"} and "multipleOf" in node:
        return True
    if "array" in kinds and {"uniqueItems", "contains", "minContains", "maxContains"} & node.keys():
        return True
    if "string" in kinds and ("format" in node and node["format"] not in XGRAMMAR_STRING_FORMATS
                              or _bounded_pattern(node)):
        return True
    if "object" in kinds:
        names = node.get("propertyNames")
        if "propertyNames" in node and (
                _bounded_pattern(names) or "patternProperties" in node or "properties" in node
                or node.get("unevaluatedProperties", True) is not True):
            return True
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict) and ("properties" in node or len(patterns) > 1):
            return True
    all_of = node.get("allOf")
    return isinstance(all_of, list) and len(all_of) > 1


def needs_guidance(schema: Any) -> bool:
    """True when some node of ``schema`` is beyond xgrammar (vLLM's ``auto`` picks guidance)."""
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if _xgrammar_cannot(node):
                return True
            pending.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            pending.extend(v for v in node if isinstance(v, (dict, list)))
    return False


def regex_fault(pattern: str) -> str | None:
    """Why no backend compiles ``pattern``, or None. Raises _GuidanceOnly for Unicode classes
    (``\\p{…}``: guidance has them, xgrammar and Python's ``re`` do not)."""
    if _LOOKAROUND.search(pattern):
        return "look-around, including look-ahead and look-behind, is not supported"
    if _BACKREFERENCE.search(pattern):
        return "backreferences are not supported"
    if _UNICODE_CLASS.search(pattern):
        raise _GuidanceOnly()
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    except (OverflowError, RecursionError):
        return "the pattern is too large"
    return None


def choice_grammar(choices: list[str]) -> str:
    """The EBNF vLLM hands xgrammar for ``choice``: one quoted alternative per choice."""
    def escape(text: str) -> str:
        out = []
        for ch in text:
            special = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch)
            if special is None and (ord(ch) < 0x20 or ord(ch) == 0x7F):
                special = f"\\u{ord(ch):04x}"
            out.append(special or ch)
        return "".join(out)
    return "root ::= " + " | ".join(f'"{escape(c)}"' for c in choices)


def _refused(backend: str, what: str, fault: str) -> InvalidRequest:
    if backend in ("auto", "guidance"):
        return InvalidRequest(f"Grammar error: {fault}")
    target = "a regex" if backend == "outlines" and what == "json schema" else "a grammar"
    return InvalidRequest(f"Failed to transform {what} into {target}: {fault}")


def _check_values(params: dict) -> None:
    """vLLM's backend-independent checks, in its order and wording."""
    choice = params.get("choice")
    if isinstance(choice, list) and not choice:
        raise InvalidRequest(f"Choice '{choice}' cannot be an empty list")
    for name in ("grammar", "json"):
        value = params.get(name)
        if isinstance(value, str) and not value.strip():
            raise InvalidRequest(f"structured_outputs.{name} cannot be an empty string")
    check_nesting(params.get("json"))
    check_nesting(params.get("structural_tag"), structural_tag=True)
    if params.get("json_object") is False:
        raise InvalidRequest("structured_outputs.json_object must be True if set; omit "
                             "structured_outputs to disable structured outputs")
    regex = params.get("regex")
    if isinstance(regex, str) and "\x00" in regex:
        raise InvalidRequest("structured_outputs.regex must not contain a NUL character "
                             "('\\x00')")
    tag = params.get("structural_tag")
    if isinstance(tag, str) and not tag.strip():
        raise InvalidRequest("structured_outputs.structural_tag cannot be an empty string")


def _check_for_backend(params: dict, backend: str) -> bool:
    """The backend's own checks; True when only guidance can take the constraint."""
    guidance_only = False
    regex = params.get("regex")
    if regex:
        try:
            fault = regex_fault(regex)
        except _GuidanceOnly:
            if backend == "xgrammar":
                raise _refused(backend, "regex", "Unicode classes (\\p{…}) are not "
                               "supported") from None
            guidance_only, fault = True, None
        if fault:
            raise _refused(backend, "regex", f"invalid regex {regex!r}: {fault}")
    schema = params.get("json")
    if schema is not None and params.get("choice") is None:
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError:
                raise InvalidRequest("Invalid JSON grammar specification.") from None
        fault = schema_fault(schema)
        if fault:
            raise _refused(backend, "json schema", fault)
        if needs_guidance(schema):
            if backend == "xgrammar":
                raise InvalidRequest("The provided JSON schema contains features not supported "
                                     "by xgrammar.")
            guidance_only = True
    return guidance_only


def wire_map(params: dict, backend: str) -> dict:
    """The 11-key structured-outputs map vLLM's frontend sends, after its checks.

    ``params`` holds exactly one constraint (the caller counted). ``backend`` is the
    deployment's ``--structured-outputs-config`` backend.

    Raises:
        InvalidRequest: a constraint vLLM would refuse with a 400 (module docstring).
    """
    _check_values(params)
    guidance_only = _check_for_backend(params, backend)
    resolved, was_auto = backend, False
    if backend == "auto":
        resolved, was_auto = ("guidance" if guidance_only else "xgrammar"), True
    wire = {"json": params.get("json"), "regex": params.get("regex"),
            "choice": params.get("choice"), "grammar": params.get("grammar"),
            "json_object": params.get("json_object"),
            "disable_any_whitespace": bool(params.get("disable_any_whitespace", False)),
            "disable_additional_properties": bool(params.get("disable_additional_properties",
                                                             False)),
            "whitespace_pattern": params.get("whitespace_pattern"),
            "structural_tag": params.get("structural_tag"),
            "_backend": resolved, "_backend_was_auto": was_auto}
    if resolved == "xgrammar" and wire["choice"]:
        # vLLM's xgrammar check replaces the choices by their grammar before sending.
        wire["grammar"], wire["choice"] = choice_grammar(wire["choice"]), None
    return wire


# -- structural tags -------------------------------------------------------------------------------


def _format_fault(node: Any) -> bool:
    """True when a structural-tag ``format`` tree names a type xgrammar does not know or holds a
    schema that is not one (only nodes with a ``type`` are looked into)."""
    if not isinstance(node, dict) or node.get("type") not in STRUCTURAL_FORMAT_TYPES:
        return True
    if node["type"] == "json_schema" and schema_fault(node.get("json_schema")) is not None:
        return True
    children = [v for k, v in node.items() if k != "json_schema"]
    while children:
        child = children.pop()
        if isinstance(child, list):
            children.extend(child)
        elif isinstance(child, dict) and "type" in child and _format_fault(child):
            return True
    return False


def _legacy_fault(tag: dict) -> bool:
    structures, triggers = tag.get("structures"), tag.get("triggers")
    if not (isinstance(structures, list) and structures and isinstance(triggers, list)
            and triggers and all(isinstance(t, str) and t for t in triggers)):
        return True
    for item in structures:
        if not (isinstance(item, dict) and isinstance(item.get("begin"), str)
                and isinstance(item.get("end"), str)):
            return True
        if schema_fault(item.get("schema")) is not None:
            return True
        if not any(item["begin"].startswith(t) for t in triggers):
            return True
    return False


def _legacy_dump(tag: dict) -> dict:
    """The model dump vLLM serializes: declared fields first, then the extras as given."""
    structures = [{"begin": s["begin"], "schema": s.get("schema"), "end": s["end"],
                   **{k: v for k, v in s.items() if k not in ("begin", "schema", "end")}}
                  for s in tag["structures"]]
    return {"type": "structural_tag", "structures": structures, "triggers": tag["triggers"],
            **{k: v for k, v in tag.items() if k not in ("type", "structures", "triggers")}}


def _tag_fault(tag: Any) -> bool:
    if not isinstance(tag, dict):
        return True
    if "structures" in tag or "triggers" in tag:
        return _legacy_fault(tag)
    return (tag.get("type") != "structural_tag" or "format" not in tag
            or _format_fault(tag["format"]))


def structural_tag_text(response_format: dict) -> str:
    """``response_format: {"type": "structural_tag", …}`` as the ``structural_tag`` string vLLM
    sends (its legacy ``structures``/``triggers`` form or the ``format`` form), checked.

    Raises:
        InvalidRequest: vLLM's "Invalid response_format structural_tag specification.".
    """
    check_nesting(response_format, structural_tag=True)
    if _tag_fault(response_format):
        raise InvalidRequest("Invalid response_format structural_tag specification.",
                             param="response_format")
    if "format" in response_format and "structures" not in response_format:
        dump = {"type": "structural_tag", "format": response_format["format"],
                **{k: v for k, v in response_format.items() if k not in ("type", "format")}}
    else:
        dump = _legacy_dump(response_format)
    return json.dumps(dump)


def check_structural_tag_param(tag: Any) -> None:
    """``structured_outputs.structural_tag`` (a JSON string) as vLLM checks it."""
    if tag is None:
        return
    fault = not isinstance(tag, str) or not tag
    if not fault:
        check_nesting(tag, structural_tag=True)
        try:
            fault = _tag_fault(json.loads(tag))
        except ValueError:
            fault = True
    if fault:
        raise InvalidRequest("Invalid structured_outputs structural_tag specification.",
                             param="structured_outputs")


def check_structural_tags(body: dict) -> None:
    """The raw-body structural-tag checks of vLLM's request models (chat and completions):
    ``structured_outputs.structural_tag``, then a ``structural_tag`` ``response_format``."""
    so = body.get("structured_outputs")
    if isinstance(so, dict):
        check_structural_tag_param(so.get("structural_tag"))
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "structural_tag":
        structural_tag_text(rf)
