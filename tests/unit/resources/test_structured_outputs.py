"""Structured-output checks and the wire map, as vLLM 0.32's frontend builds it (messages and
backends observed on vLLM's own frontend: tests/interop/test_structured_outputs_parity.py)."""
from __future__ import annotations

import json

import pytest

from base.errors import InvalidRequest
from resources.common import structured_outputs as so


def _wire(backend="auto", **params):
    return so.wire_map(params, backend)


def _refusal(backend="auto", **params) -> str:
    with pytest.raises(InvalidRequest) as info:
        so.wire_map(params, backend)
    return info.value.message


def test_backend_follows_the_configuration():
    assert (_wire(json={"type": "object"})["_backend"],
            _wire(json={"type": "object"})["_backend_was_auto"]) == ("xgrammar", True)
    for backend in ("xgrammar", "guidance", "outlines", "lm-format-enforcer"):
        wire = _wire(backend, json={"type": "object"})
        assert (wire["_backend"], wire["_backend_was_auto"]) == (backend, False)
    assert len(_wire(regex="a+")) == 11


def test_auto_names_guidance_for_what_xgrammar_cannot_do():
    for schema in ({"type": "integer", "multipleOf": 3},
                   {"type": "array", "uniqueItems": True},
                   {"type": "string", "format": "color"},
                   {"type": "string", "pattern": "a+", "maxLength": 3},
                   {"allOf": [{"type": "string"}, {"enum": ["a"]}]},
                   {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}):
        assert _wire(json=schema)["_backend"] == "guidance", schema
        assert "not supported by xgrammar" in _refusal("xgrammar", json=schema)
    assert _wire(json={"type": "string", "format": "email"})["_backend"] == "xgrammar"
    assert _wire(regex=r"\p{L}+")["_backend"] == "guidance"
    assert _refusal("xgrammar", regex=r"\p{L}+").startswith(
        "Failed to transform regex into a grammar: ")


def test_choice_becomes_the_grammar_xgrammar_gets():
    wire = _wire(choice=["yes", 'no"x', "a\nb"])
    assert wire["choice"] is None
    assert wire["grammar"] == 'root ::= "yes" | "no\\"x" | "a\\nb"'
    # Other backends get the choices as they are.
    assert _wire("guidance", choice=["yes"])["choice"] == ["yes"]


@pytest.mark.parametrize("params, message", [
    ({"choice": []}, "Choice '[]' cannot be an empty list"),
    ({"grammar": "  "}, "structured_outputs.grammar cannot be an empty string"),
    ({"json": " "}, "structured_outputs.json cannot be an empty string"),
    ({"json_object": False}, "structured_outputs.json_object must be True if set; omit "
                             "structured_outputs to disable structured outputs"),
    ({"regex": "a\x00"}, "structured_outputs.regex must not contain a NUL character ('\\x00')"),
    ({"json": "{not json"}, "Invalid JSON grammar specification."),
    ({"json": json.loads('{"a":' * 70 + "1" + "}" * 70)},
     "The JSON schema is nested too deeply: objects and arrays may nest at most 64 levels"),
])
def test_vllm_worded_refusals(params, message):
    assert _refusal(**params) == message


@pytest.mark.parametrize("schema", [{"type": "foo"}, {"type": "object", "properties": 5},
                                    {"required": "a"}, [1, 2], '"a string"'])
def test_schemas_that_are_not_json_schemas(schema):
    assert _refusal(json=schema).startswith("Grammar error: ")
    assert _refusal("guidance", json=schema).startswith("Grammar error: ")
    assert _refusal("xgrammar", json=schema).startswith(
        "Failed to transform json schema into a grammar: ")


@pytest.mark.parametrize("regex", ["(ab", "[a-", "(?=a)a", "(?<!b)a", r"(a)\1", "a{2,1}"])
def test_regexes_no_backend_compiles(regex):
    assert _refusal(regex=regex).startswith("Grammar error: invalid regex ")


def test_good_constraints_pass_unchanged():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert _wire(json=schema)["json"] == schema
    assert _wire(json=json.dumps(schema))["json"] == json.dumps(schema)
    assert _wire(regex="[a-z]+\\d{2}")["regex"] == "[a-z]+\\d{2}"
    assert _wire(grammar='root ::= "a"')["grammar"] == 'root ::= "a"'
    assert _wire(json=True)["_backend"] == "xgrammar"


LEGACY = {"type": "structural_tag", "triggers": ["<f"],
          "structures": [{"begin": "<f>", "schema": {"type": "object"}, "end": "</f>"}]}


def test_structural_tag_text_is_vllms_dump():
    assert so.structural_tag_text(LEGACY) == (
        '{"type": "structural_tag", "structures": [{"begin": "<f>", "schema": {"type": '
        '"object"}, "end": "</f>"}], "triggers": ["<f"]}')
    new = {"type": "structural_tag", "z": 1, "format": {"type": "const_string", "value": "hi"}}
    assert so.structural_tag_text(new) == (
        '{"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}, "z": 1}')


@pytest.mark.parametrize("tag", [
    {"type": "structural_tag"},
    {"type": "structural_tag", "format": "abc"},
    {"type": "structural_tag", "format": {"type": "nope"}},
    {"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "nope"}]}},
    {"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"type": "x"}}},
    {**LEGACY, "structures": []},
    {**LEGACY, "triggers": ["<g"]},
    {**LEGACY, "structures": [{"begin": "<f>", "end": "</f>"}]},
])
def test_malformed_structural_tags(tag):
    with pytest.raises(InvalidRequest) as info:
        so.structural_tag_text(tag)
    assert info.value.message == ("Invalid response_format structural_tag specification. "
                                  "(parameter=response_format)")
    assert info.value.param == "response_format"


def test_structural_tag_in_structured_outputs():
    so.check_structural_tag_param(json.dumps(LEGACY))
    with pytest.raises(InvalidRequest) as info:
        so.check_structural_tag_param("{bad")
    assert info.value.param == "structured_outputs"
