"""vLLM's HTTP frontend options: CORS, --enable-request-id-headers, the API key's paths, SSL,
--root-path."""
from __future__ import annotations

import subprocess

import pytest
import requests

KEY = "sk-test"
ORIGIN = "https://ok.example"


@pytest.fixture(scope="module")
def options_server(model_dir):
    from tests.integration.harness import deployment
    with deployment(model_dir, env={
            "GREENFRONT_ALLOWED_ORIGINS": f'["{ORIGIN}"]',
            "GREENFRONT_ENABLE_REQUEST_ID_HEADERS": "1",
            "GREENFRONT_API_KEY": KEY, "GREENFRONT_ROOT_PATH": "/api"}) as srv:
        yield srv


def _preflight(url: str, origin: str, method: str = "POST", headers: str | None = None):
    sent = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers:
        sent["Access-Control-Request-Headers"] = headers
    return requests.options(url + "/v1/chat/completions", headers=sent, timeout=10)


def test_cors_preflight_allows_the_listed_origin_and_denies_others(options_server):
    ok = _preflight(options_server.url, ORIGIN, headers="authorization, content-type")
    assert (ok.status_code, ok.text) == (200, "OK")
    assert ok.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert ok.headers["Access-Control-Allow-Methods"] == \
        "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT, QUERY"
    assert ok.headers["Access-Control-Allow-Headers"] == "authorization, content-type"
    assert ok.headers["Access-Control-Max-Age"] == "600"
    denied = _preflight(options_server.url, "https://evil.example")
    assert (denied.status_code, denied.text) == (400, "Disallowed CORS origin")
    assert "Access-Control-Allow-Origin" not in denied.headers


def test_cors_simple_requests_name_only_allowed_origins(options_server):
    auth = {"Authorization": f"Bearer {KEY}"}
    ok = requests.get(options_server.url + "/v1/models", timeout=10,
                      headers={**auth, "Origin": ORIGIN})
    assert ok.status_code == 200 and ok.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "Origin" in ok.headers["Vary"]
    denied = requests.get(options_server.url + "/v1/models", timeout=10,
                          headers={**auth, "Origin": "https://evil.example"})
    assert denied.status_code == 200 and "Access-Control-Allow-Origin" not in denied.headers


def test_request_id_is_echoed_or_generated(options_server):
    echoed = requests.get(options_server.url + "/health", headers={"X-Request-Id": "abc-1"},
                          timeout=10)
    assert echoed.headers["X-Request-Id"] == "abc-1"
    made = requests.get(options_server.url + "/health", timeout=10).headers["X-Request-Id"]
    assert len(made) == 32 and int(made, 16) >= 0


def test_the_api_key_guards_exactly_vllms_prefixes(options_server):
    url = options_server.url
    for path in ("/v1/models",):
        assert requests.get(url + path, timeout=10).status_code == 401
    assert requests.post(url + "/inference/v1/generate", json={}, timeout=10).status_code == 401
    for path in ("/health", "/version", "/openapi.json"):
        assert requests.get(url + path, timeout=10).status_code == 200, path
    tokenized = requests.post(url + "/tokenize", json={"prompt": "hi"}, timeout=10)
    assert tokenized.status_code == 200, tokenized.text


def test_ssl_keyfile_and_certfile_serve_https(model_dir, tmp_path):
    from tests.integration.harness import GreenfrontServer, wait_for
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    srv = GreenfrontServer(model_dir, env={"GREENFRONT_SSL_KEYFILE": str(key),
                                           "GREENFRONT_SSL_CERTFILE": str(cert)}).launch()
    https = srv.url.replace("http://", "https://")

    def healthy() -> bool:
        try:
            return requests.get(https + "/health", verify=str(cert), timeout=5).status_code == 200
        except requests.RequestException:
            return False
    try:
        assert wait_for(healthy, timeout=90), srv.log()
        with pytest.raises(requests.ConnectionError):
            requests.get(srv.url + "/health", timeout=5)  # plain HTTP is not served
    finally:
        srv.stop_later()


def test_root_path_prefix_is_routed_without_it_and_guarded_alike(options_server):
    """--root-path /api, as FastAPI's root_path in vLLM: /api/<route> is <route>, a path
    without the prefix still works, the API key guards the stripped path, /openapi.json names
    the prefix as its server."""
    url, auth = options_server.url, {"Authorization": f"Bearer {KEY}"}
    assert requests.get(url + "/api/v1/models", headers=auth, timeout=10).json()[
        "data"][0]["id"] == "tiny"
    assert requests.get(url + "/v1/models", headers=auth, timeout=10).status_code == 200
    assert requests.get(url + "/api/v1/models", timeout=10).status_code == 401
    assert requests.get(url + "/api/health", timeout=10).status_code == 200
    assert requests.get(url + "/api", timeout=10).status_code == 404
    assert requests.get(url + "/apiv1/models", headers=auth, timeout=10).status_code == 404
    done = requests.post(url + "/api/v1/completions", headers=auth, timeout=30, json={
        "model": "tiny", "prompt": "hi", "max_tokens": 2})
    assert done.status_code == 200, done.text
    document = requests.get(url + "/api/openapi.json", timeout=10).json()
    assert document["servers"] == [{"url": "/api"}] and "/v1/models" in document["paths"]


def test_server_load_tracking_counts_generation_requests_as_vllm(make_server):
    """--enable-server-load-tracking: /load counts completions and chat requests in flight (an
    n=2 request once), until their last byte; other routes are not counted."""
    from tests.integration.harness import wait_for
    from tests.integration.test_admission import _SlowStream
    srv = make_server(env={"GREENFRONT_ENABLE_SERVER_LOAD_TRACKING": "1"})
    load = lambda: requests.get(srv.url + "/load", timeout=10).json()["server_load"]  # noqa: E731
    assert load() == 0
    held = _SlowStream(srv.url, n=2, temperature=1.0)
    try:
        assert held.started.wait(60)
        assert load() == 1
        assert requests.post(srv.url + "/tokenize", json={"prompt": "hi"}, timeout=10).ok
        assert load() == 1
    finally:
        held.close()
    assert wait_for(lambda: load() == 0, timeout=30)
