"""/openapi.json: generated from the served routes and the endpoints' field tables."""
from __future__ import annotations

import falcon.inspect
import jsonschema_rs
import pytest
import schemathesis

from app import build_falcon_app
from base.config import Config
from resources.chat import types as chat_types
from resources.common.fields import INVALID, MISSING, schema_of
from resources.completions import types as completion_types
from resources.generate import types as generate_types
from resources.openapi import build_document
from resources.openapi_checks import REQUEST_CHECKS
from resources.tokenize import types as tokenize_types
from runtime.state import WorkerState


def _document(**config) -> dict:
    return build_document(_falcon_app(Config(served_model_names=("tiny",), **config)))


def _falcon_app(config: Config):
    return build_falcon_app(config, WorkerState(config))


@pytest.fixture(scope="module")
def document() -> dict:
    return _document()


def test_document_is_valid_openapi_that_schemathesis_loads(document):
    schema = schemathesis.openapi.from_dict(document)
    schema.validate()  # the OpenAPI 3.1 meta-schema
    operations = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    assert ("POST", "/v1/chat/completions") in operations
    assert ("POST", "/inference/v1/generate") in operations
    assert ("GET", "/openapi.json") in operations


def test_paths_are_exactly_the_served_routes():
    app = _falcon_app(Config(served_model_names=("tiny",), server_dev_mode=True))
    document = build_document(app)
    served = {route.path for route in falcon.inspect.inspect_routes(app)}
    assert set(document["paths"]) == served
    assert "/sleep" in document["paths"]  # a gated route appears when it is served...
    assert "/sleep" not in _document()["paths"]  # ...and only then


@pytest.mark.parametrize("component, fields", [
    ("CompletionRequest", completion_types.fields(4)),
    ("ChatCompletionRequest", chat_types.fields(4)),
    ("TokenizeChatRequest", tokenize_types.CHAT_FIELDS),
    ("DetokenizeRequest", tokenize_types.DETOKENIZE_FIELDS),
    ("SamplingParams", generate_types.SAMPLING),
])
def test_request_schemas_are_the_field_tables(document, component, fields):
    schemas = document["components"]["schemas"]
    schema = (schemas["GenerateRequest"]["properties"]["sampling_params"]
              if component == "SamplingParams" else schemas[component])
    assert list(schema["properties"]) == [name for name, _, _ in fields]
    required = [name for name, _, d in fields if d is MISSING]
    required += list(REQUEST_CHECKS.get(component, ((), {}))[0])  # the semantic checks' own
    assert schema.get("required", []) == required


def test_streaming_endpoints_document_server_sent_events(document):
    ok = document["paths"]["/v1/completions"]["post"]["responses"]["200"]["content"]
    assert set(ok) == {"application/json", "text/event-stream"}
    tokenize = document["paths"]["/tokenize"]["post"]["responses"]["200"]["content"]
    assert set(tokenize) == {"application/json"}


PROBES = [None, True, False, 0, 7, -3, 2 ** 70, 1.5, "", "x", "5", [], [1, 2], ["a"], [[1]],
          {}, {"a": 1}, {"include_usage": True}, [{"role": "user", "content": "hi"}]]
TABLES = (completion_types.fields(4) + chat_types.fields(4) + tokenize_types.CHAT_FIELDS
          + generate_types.HEAD + generate_types.TAIL + generate_types.SAMPLING)


@pytest.mark.parametrize("name, validator", [(n, v) for n, v, _ in TABLES],
                         ids=[f"{i}-{n}" for i, (n, _, _) in enumerate(TABLES)])
def test_schema_admits_nothing_the_field_parser_refuses(name, validator):
    """A client that follows the document never gets a field-type 400 (the parser is laxer:
    it also takes the strings pydantic's lax mode takes, which the document does not list)."""
    check = jsonschema_rs.validator_for(schema_of(validator))
    for value in PROBES:
        if check.is_valid(value):
            errors: list = []
            assert validator(value, ("body", name), errors) is not INVALID, (value, errors)


# One body just outside each bound /openapi.json publishes beyond the JSON types
# (resources.openapi_checks), and one just inside: the converter must refuse the first with a
# 400 and take the second, so the document never claims a check the server does not make.
OUTSIDE = [("n", 0, 1), ("presence_penalty", 2.5, 2.0), ("frequency_penalty", -2.5, -2.0),
           ("repetition_penalty", 0.0, 0.5), ("temperature", -0.5, 0.0), ("top_p", 0.0, 1.0),
           ("top_p", 1.5, 0.5), ("top_k", -2, -1), ("min_p", 1.5, 1.0), ("max_tokens", 0, 1),
           ("min_tokens", -1, 0), ("stop", [""], ["x"]), ("bad_words", [""], ["x"]),
           ("stream_interval", 0, 1)]


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
@pytest.mark.parametrize("name, outside, inside", OUTSIDE,
                         ids=[f"{n}={o!r}" for n, o, _ in OUTSIDE])
def test_published_bounds_are_checks_the_server_makes(ctx, document, endpoint, name, outside,
                                                      inside):
    from base.errors import ApiError
    from resources.chat.convert import prepare_chat
    from resources.completions.convert import prepare_completion
    component, prepare, base = {
        "completions": ("CompletionRequest", prepare_completion, {"prompt": "hi"}),
        "chat": ("ChatCompletionRequest", prepare_chat,
                 {"messages": [{"role": "user", "content": "hi"}]}),
    }[endpoint]
    schema = document["components"]["schemas"][component]["properties"].get(name)
    if schema is None:
        pytest.skip(f"{component} has no {name}")
    check = jsonschema_rs.validator_for(schema)
    assert not check.is_valid(outside) and check.is_valid(inside)
    extra = {"temperature": 1.0} if name == "n" else {}
    with pytest.raises(ApiError) as info:
        prepare({**base, **extra, name: outside, "max_tokens": 4} if name != "max_tokens"
                else {**base, name: outside}, ctx)
    assert info.value.status == 400
    prepare({**base, **extra, name: inside}, ctx)


@pytest.mark.parametrize("component, body", [
    ("CompletionRequest", {}), ("CompletionRequest", {"prompt": ""}),
    ("CompletionRequest", {"prompt": []}), ("CompletionRequest", {"prompt": None}),
    ("ChatCompletionRequest", {"messages": []}),
    ("CompletionRequest", {"prompt": "x", "prompt_embeds": "AAAA"}),
    ("ChatCompletionRequest", {"messages": [{"role": "user", "content": "x"}],
                               "logits_processors": ["a.b"]}),
    ("ChatCompletionRequest", {"messages": [{"role": "user", "content": "x"}], "tools": []}),
])
def test_published_required_and_non_empty_inputs_are_checked(ctx, document, component, body):
    from base.errors import ApiError
    from resources.chat.convert import prepare_chat
    from resources.completions.convert import prepare_completion
    prepare = prepare_completion if component == "CompletionRequest" else prepare_chat
    assert not jsonschema_rs.validator_for(document["components"]["schemas"][component]
                                           ).is_valid(body)
    with pytest.raises(ApiError) as info:
        prepare(body, ctx)
    assert info.value.status == 400
