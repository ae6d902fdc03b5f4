"""docs/api.md names every route the app serves and every field of every request body, and
lists as not built only routes the app does not serve."""
from __future__ import annotations

import os
import re

import falcon.inspect
import pytest

from app import build_falcon_app
from base.config import Config
from runtime.state import WorkerState
from resources.openapi import build_document

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Request body (OpenAPI component) → the sections of docs/api.md that must name its fields.
SECTIONS = {
    "CompletionRequest": ("3", "4"),
    "ChatCompletionRequest": ("3", "5"),
    "TokenizeCompletionRequest": ("7",),
    "TokenizeChatRequest": ("7",),
    "DetokenizeRequest": ("7",),
    "GenerateRequest": ("8",),
    "SamplingParams": ("8",),
    "LoadLoRAAdapterRequest": ("9",),
    "UnloadLoRAAdapterRequest": ("9",),
    "AnthropicMessagesRequest": ("13",),
    "AnthropicCountTokensRequest": ("13",),
    "EmbeddingCompletionRequest": ("14",),
    "EmbeddingChatRequest": ("14",),
    "PoolingCompletionRequest": ("14",),
    "PoolingChatRequest": ("14",),
    "ClassificationCompletionRequest": ("14",),
    "ClassificationChatRequest": ("14",),
    "ScoreQueriesDocumentsRequest": ("14",),
    "ScoreQueriesItemsRequest": ("14",),
    "ScoreData1Data2Request": ("14",),
    "ScoreText1Text2Request": ("14",),
    "RerankRequest": ("14",),
    "CohereEmbedRequest": ("14",),
}
NOT_BUILT = "11"


def _sections() -> dict[str, str]:
    """Top-level section number → its text (subsections included)."""
    with open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8") as f:
        text = f.read()
    parts = re.split(r"^## (\d+)\. ", text, flags=re.M)
    return {number: body for number, body in zip(parts[1::2], parts[2::2])}


@pytest.fixture(scope="module")
def app():
    """The app with every gated route on (dev mode, runtime LoRA)."""
    config = Config(served_model_names=("tiny",), server_dev_mode=True,
                    allow_runtime_lora_updating=True)
    return build_falcon_app(config, WorkerState(config))


def _backticked(text: str) -> set[str]:
    return {" ".join(span.split()) for span in re.findall(r"`([^`]+)`", text)}


def test_every_served_route_is_documented(app):
    named = _backticked("".join(_sections().values()))
    missing = []
    for route in falcon.inspect.inspect_routes(app):
        methods = {m.method for m in route.methods if not m.internal}
        if not ({route.path} | {f"{m} {route.path}" for m in methods}) & named:
            missing.append(route.path)
    assert not missing, f"docs/api.md does not name these served routes: {missing}"


def test_every_request_field_is_documented(app):
    schemas = build_document(app)["components"]["schemas"]
    schemas["SamplingParams"] = schemas["GenerateRequest"]["properties"]["sampling_params"]
    sections = _sections()
    assert set(SECTIONS) <= set(schemas), "a request body was renamed: update SECTIONS"
    bodies = {name for name in schemas if name != "ErrorResponse"}
    assert bodies <= set(SECTIONS), f"request bodies without a section: {bodies - set(SECTIONS)}"
    missing = []
    for component, numbers in SECTIONS.items():
        named = _backticked("".join(sections[n] for n in numbers))
        missing += [f"{component}.{prop} (§{'/§'.join(numbers)})"
                    for prop in schemas[component]["properties"] if prop not in named]
    assert not missing, f"docs/api.md does not name these request fields: {missing}"


def test_routes_listed_as_not_built_are_not_served(app):
    served = {route.path for route in falcon.inspect.inspect_routes(app)}
    listed = {p for p in _backticked(_sections()[NOT_BUILT]) if p.startswith("/")}
    assert {"/v1/responses", "/v1/messages", "/v1/embeddings"} <= listed | served
    assert not listed & served, f"served, yet listed as not built: {listed & served}"
