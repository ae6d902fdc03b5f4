"""GET /openapi.json over HTTP: what schemathesis and clients load from a running server."""
from __future__ import annotations

import requests
import schemathesis


def test_openapi_json_is_served_and_loads(server):
    resp = requests.get(server.url + "/openapi.json", timeout=10)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/json")
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    schema.validate()
    paths = {op.ok().path for op in schema.get_all_operations()}
    assert {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize",
            "/inference/v1/generate", "/v1/models", "/health"} <= paths
