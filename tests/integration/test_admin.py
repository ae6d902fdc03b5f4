"""Admin plumbing (resources/admin): dev-mode routes and runtime LoRA, against the simulator.

Three deployments: the shared default one (gates off: every admin route is a 404), a dev-mode
one with two engines (every call fans out to both ranks; LoRA allowed but the engines lack
LoRA support), and a LoRA one with two workers (the adapter registry is shared between them,
and requests naming an adapter as ``model`` reach the engine with its LoRARequest).
"""
from __future__ import annotations

import os
import re
import threading

import openai
import pytest
import requests

from tests.integration.harness import GreenfrontServer, deployments, wait_for

DEV_ROUTES = [("POST", "/sleep"), ("POST", "/wake_up"), ("GET", "/is_sleeping"),
              ("POST", "/reset_prefix_cache"), ("POST", "/pause"), ("GET", "/is_paused"),
              ("POST", "/collective_rpc"), ("GET", "/server_info"), ("GET", "/get_world_size")]
LORA_ROUTES = [("POST", "/v1/load_lora_adapter"), ("POST", "/v1/unload_lora_adapter")]
KEY = "admin-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def _servers(model_dir, tmp_path_factory):
    """The module's two deployments, started at once: dev mode, and runtime LoRA updating."""
    dev = {"VLLM_SERVER_DEV_MODE": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1",
           "GREENFRONT_ENGINE_COUNT": "2", "GREENFRONT_API_KEY": KEY}
    allowed = tmp_path_factory.mktemp("loras")
    lora = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1",
            "VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES": f"/nonexistent-prefix,{allowed}"}
    with deployments((model_dir, {"env": dev, "sim_args": "--output-mode echo --itl-ms 2 "
                                                          "--verbose"}),
                     (model_dir, {"env": lora, "workers": 2,
                                  "sim_args": "--output-mode echo --enable-lora --verbose"})
                     ) as (dev_srv, lora_srv):
        lora_srv.allowed = str(allowed)
        yield dev_srv, lora_srv


@pytest.fixture(scope="module")
def dev_server(_servers):
    return _servers[0]


@pytest.fixture(scope="module")
def lora_server(_servers):
    return _servers[1]


def _utility_calls(srv: GreenfrontServer, method: str) -> list[tuple[str, str]]:
    """(rank, args) of each UTILITY ``method`` call the simulators logged."""
    return re.findall(rf"engine\.sim rank=(\d) UTILITY {method}(\(.*?\)) call_id=", srv.log())


def test_admin_routes_are_absent_unless_enabled(server, lora_server):
    for method, path in DEV_ROUTES + LORA_ROUTES:
        r = requests.request(method, server.url + path, json={}, timeout=10)
        assert r.status_code == 404, (path, r.text)
    # The LoRA gate alone does not open the dev routes.
    for method, path in DEV_ROUTES:
        assert requests.request(method, lora_server.url + path, timeout=10).status_code == 404


def test_sleep_and_wake_up_reach_every_engine(dev_server):
    url = dev_server.url
    r = requests.post(url + "/sleep?level=1&mode=abort", headers=AUTH, timeout=10)
    assert r.status_code == 200 and r.json() == {"status": "sleeping", "level": 1}
    assert requests.get(url + "/is_sleeping", headers=AUTH, timeout=10).json() == \
        {"is_sleeping": True}
    assert _sleep_state(url) == {("0", "awake"): 0, ("0", "weights_offloaded"): 1,
                                 ("0", "discard_all"): 0, ("1", "awake"): 0,
                                 ("1", "weights_offloaded"): 1, ("1", "discard_all"): 0}
    r = requests.post(url + "/wake_up", headers=AUTH, timeout=10)
    assert r.status_code == 200 and r.json() == {"status": "awake", "tags": None}
    assert requests.get(url + "/is_sleeping", headers=AUTH, timeout=10).json() == \
        {"is_sleeping": False}
    assert _sleep_state(url)[("1", "awake")] == 1
    r = requests.post(url + "/wake_up?tags=weights&tags=kv_cache", headers=AUTH, timeout=10)
    assert r.json() == {"status": "awake", "tags": ["weights", "kv_cache"]}
    assert wait_for(lambda: sorted(_utility_calls(dev_server, "sleep")) ==
                       [("0", "(1, 'abort')"), ("1", "(1, 'abort')")]), dev_server.log()
    assert ("1", "(['weights', 'kv_cache'],)") in _utility_calls(dev_server, "wake_up")
    bad = requests.post(url + "/sleep?level=3&mode=nap", headers=AUTH, timeout=10)
    assert bad.status_code == 400
    assert "2 validation errors" in bad.json()["error"]["message"]


def _sleep_state(url: str) -> dict:
    """vllm:engine_sleep_state by (engine, sleep_state), from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = requests.get(url + "/metrics", timeout=10).text
    return {(s.labels["engine"], s.labels["sleep_state"]): s.value
            for f in text_string_to_metric_families(text) if f.name == "vllm:engine_sleep_state"
            for s in f.samples}


def test_reset_caches(dev_server):
    url = dev_server.url
    r = requests.post(url + "/reset_prefix_cache?reset_running_requests=true", headers=AUTH,
                      timeout=10)
    assert r.status_code == 200 and r.json() == {"success": True}
    assert wait_for(lambda: sorted(_utility_calls(dev_server, "reset_prefix_cache")) ==
                       [("0", "(True, False)"), ("1", "(True, False)")])
    for path in ("/reset_mm_cache", "/reset_encoder_cache"):
        r = requests.post(url + path, headers=AUTH, timeout=10)
        assert r.status_code == 200 and r.content == b""


def test_pause_keep_holds_new_requests_until_resume(dev_server):
    url = dev_server.url
    r = requests.post(url + "/pause?mode=keep&clear_cache=false", headers=AUTH, timeout=10)
    assert r.status_code == 200 and r.json() == {"status": "paused"}
    assert requests.get(url + "/is_paused", headers=AUTH, timeout=10).json() == {"is_paused": True}
    done: dict = {}

    def complete() -> None:
        done["r"] = requests.post(url + "/v1/completions", headers=AUTH, timeout=30,
                                  json={"prompt": "held back", "max_tokens": 2})
    t = threading.Thread(target=complete)
    t.start()
    t.join(0.7)
    assert t.is_alive(), "a completion finished while the scheduler was paused"
    r = requests.post(url + "/resume", headers=AUTH, timeout=10)
    assert r.status_code == 200 and r.json() == {"status": "resumed"}
    t.join(15)
    assert not t.is_alive() and done["r"].status_code == 200, done.get("r")
    assert done["r"].json()["choices"][0]["text"] == "held back"
    assert requests.get(url + "/is_paused", headers=AUTH, timeout=10).json() == \
        {"is_paused": False}
    assert ("1", "('keep', False)") in _utility_calls(dev_server, "pause_scheduler")
    assert requests.post(url + "/pause?mode=later", headers=AUTH, timeout=10).status_code == 400


def test_collective_rpc_and_weight_version(dev_server):
    url = dev_server.url
    r = requests.post(url + "/collective_rpc", headers=AUTH, timeout=10,
                      json={"method": "report", "args": ["x"], "kwargs": {"k": "v"}})
    assert r.status_code == 200 and r.json() == {"results": [None]}
    assert ("0", "('report', None, ['x'], {'k': 'v'})") in \
        _utility_calls(dev_server, "collective_rpc")
    r = requests.post(url + "/collective_rpc", headers=AUTH, json={"args": []}, timeout=10)
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "Missing 'method' in request body"
    assert requests.get(url + "/weight_info", headers=AUTH, timeout=10).json() == \
        {"weight_version": "default"}
    r = requests.post(url + "/update_weight_version", headers=AUTH, timeout=10,
                      json={"new_version": "v2"})
    assert r.json() == {"success": True, "new_version": "v2"}
    assert requests.get(url + "/weight_info", headers=AUTH, timeout=10).json() == \
        {"weight_version": "v2"}


def test_server_info_and_world_size(dev_server):
    url = dev_server.url
    info = requests.get(url + "/server_info?config_format=json", headers=AUTH, timeout=10).json()
    assert info["vllm_config"]["api_keys"] == "<redacted>"
    assert KEY not in str(info)
    assert info["vllm_env"]["VLLM_SERVER_DEV_MODE"] is True
    assert set(info["engines"]) == {"0", "1"}
    text = requests.get(url + "/server_info", headers=AUTH, timeout=10).json()
    assert isinstance(text["vllm_config"], str) and KEY not in text["vllm_config"]
    r = requests.get(url + "/get_world_size", headers=AUTH, timeout=10)
    assert r.status_code == 200 and r.json()["world_size"] >= 1
    # vLLM 0.32 guards only /v1, /v2, /inference and /cohere with the API key.
    assert requests.get(url + "/get_world_size").status_code == 200
    assert requests.get(url + "/v1/models").status_code == 401


def test_lora_refused_without_engine_support(dev_server):
    r = requests.post(dev_server.url + "/v1/load_lora_adapter", headers=AUTH, timeout=10,
                      json={"lora_name": "a", "lora_path": "org/adapter"})
    assert r.status_code == 400
    assert "--enable-lora" in r.json()["error"]["message"]


def test_lora_load_and_unload(lora_server):
    url = lora_server.url
    path1 = os.path.join(lora_server.allowed, "one")
    os.makedirs(path1)

    def load(name: str, path: str, **extra) -> requests.Response:
        return requests.post(url + "/v1/load_lora_adapter", timeout=10,
                             json={"lora_name": name, "lora_path": path, **extra})

    def unload(name: str) -> requests.Response:
        return requests.post(url + "/v1/unload_lora_adapter", json={"lora_name": name},
                             timeout=10)

    r = load("one", path1)
    assert r.status_code == 200, r.text
    assert r.text == "Success: LoRA adapter 'one' added successfully."
    # Two workers share the registry: every one of these sees "one" (ids stay unique).
    for _ in range(4):
        dup = load("one", path1)
        assert dup.status_code == 400
        assert dup.json()["error"] == {
            "message": "The lora adapter 'one' has already been loaded. If you want to load "
                       "the adapter in place, set 'load_inplace' to True.",
            "type": "InvalidUserInput", "param": None, "code": 400}
    assert load("one", path1, load_inplace=True).status_code == 200
    assert load("two", "org/adapter").status_code == 200  # a hub id, not a local path
    models = requests.get(url + "/v1/models", timeout=10).json()["data"]
    assert [(m["id"], m["parent"]) for m in models] == [("tiny", None), ("one", "tiny"),
                                                        ("two", "tiny")]
    assert wait_for(lambda: re.search(
        r"UTILITY add_lora\(\['two', 2, 'org/adapter', None, False, False\],\)",
        lora_server.log())), lora_server.log()
    assert re.search(r"UTILITY add_lora\(\['one', 1, .*, None, True, False\],\)",
                     lora_server.log())

    outside = load("three", "/etc")
    assert outside.status_code == 400
    assert "VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES" in outside.json()["error"]["message"]
    assert load("tiny", path1).json()["error"]["message"] == \
        "The lora adapter 'tiny' conflicts with a served base model."
    missing = requests.post(url + "/v1/load_lora_adapter", json={"lora_name": "x"}, timeout=10)
    assert missing.status_code == 400 and "Field required" in missing.json()["error"]["message"]

    r = unload("one")
    assert r.status_code == 200 and r.text == "Success: LoRA adapter 'one' removed successfully."
    assert wait_for(lambda: "UTILITY remove_lora(1,)" in lora_server.log())
    for name in ("one", "never"):
        gone = unload(name)
        assert gone.status_code == 404
        assert gone.json()["error"]["message"] == f"The lora adapter '{name}' cannot be found."
    assert load("one", path1).status_code == 200  # a reload gets a new id
    assert wait_for(lambda: re.search(r"UTILITY add_lora\(\['one', 3, ", lora_server.log()))


def _load_sql_adapter(lora_server) -> int:
    """Load the adapter ``sql`` at runtime; the LoRA id the engine's add_lora got."""
    path = os.path.join(lora_server.allowed, "sql")
    os.makedirs(path, exist_ok=True)
    r = requests.post(lora_server.url + "/v1/load_lora_adapter", timeout=10,
                      json={"lora_name": "sql", "lora_path": path})
    assert r.status_code == 200, r.text
    added = re.compile(r"UTILITY add_lora\(\['sql', (\d+), ")
    assert wait_for(lambda: added.search(lora_server.log())), lora_server.log()
    return int(added.search(lora_server.log()).group(1))


def _ask_every_route_for_sql(url: str, client: openai.OpenAI) -> list[str]:
    """model=sql on every generation and tokenizer route (twice: two workers), each answer
    naming the adapter; the external ids of the engine requests that must carry it."""
    sent = []
    for i in range(2):  # two workers: each must see the adapter another one loaded
        rid = f"lora-{i}"
        out = client.completions.create(model="sql", prompt="The capital of France is",
                                        max_tokens=3, temperature=0,
                                        extra_headers={"X-Request-Id": f"c{rid}"})
        assert out.model == "sql" and out.choices[0].text == "The capital of"
        chat = client.chat.completions.create(model="sql", max_tokens=2, messages=[
            {"role": "user", "content": "Hi"}], extra_headers={"X-Request-Id": f"h{rid}"})
        assert chat.model == "sql" and chat.choices[0].finish_reason == "length"
        chunks = list(client.chat.completions.create(
            model="sql", max_tokens=2, stream=True, messages=[{"role": "user",
                                                               "content": "Hi"}],
            extra_headers={"X-Request-Id": f"s{rid}"}))
        assert chunks and {c.model for c in chunks} == {"sql"}
        sent += [f"cmpl-c{rid}-0", f"chatcmpl-h{rid}", f"chatcmpl-s{rid}"]
    # A streamed completion through raw HTTP: every SSE chunk names the adapter.
    r = requests.post(url + "/v1/completions", timeout=10, stream=True,
                      headers={"X-Request-Id": "raw"},
                      json={"model": "sql", "prompt": "Hello", "max_tokens": 2,
                            "stream": True})
    events = [line for line in r.iter_lines() if line.startswith(b"data: {")]
    assert r.status_code == 200 and events
    assert all(b'"model":"sql"' in e for e in events), events
    sent.append("cmpl-raw-0")
    r = requests.post(url + "/inference/v1/generate", timeout=10,
                      headers={"X-Request-Id": "gen"},
                      json={"model": "sql", "token_ids": [1, 22177],
                            "sampling_params": {"max_tokens": 2}})
    assert r.status_code == 200 and r.json()["model"] == "sql", r.text
    sent.append("generate-tokens-gen")
    for route, body in (("/tokenize", {"prompt": "Hello world"}),
                        ("/detokenize", {"tokens": [22177]})):
        assert requests.post(url + route, json={"model": "sql", **body},
                             timeout=10).status_code == 200
    return sent


def test_requests_naming_a_lora_adapter(lora_server):
    """model=<adapter>: accepted by every generation and tokenizer route on both workers, the
    adapter's name in every body and chunk, its LoRARequest in every ADD; 404 after unload."""
    url = lora_server.url
    lora_id = _load_sql_adapter(lora_server)
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    try:
        sent = _ask_every_route_for_sql(url, client)
        base = client.completions.create(model="tiny", prompt="Hi", max_tokens=1,
                                         extra_headers={"X-Request-Id": "base"})
        assert base.model == "tiny"

        def adds() -> dict[str, str]:
            return dict(re.findall(r"ADD (\S+)-[0-9a-f]{8} prompt_len=.*?client=\d+(.*)",
                                   lora_server.log()))
        assert wait_for(lambda: set(sent) | {"cmpl-base-0"} <= set(adds())), \
            (sent, lora_server.log())
        got = adds()
        assert {rid: got[rid] for rid in sent} == {rid: f" lora=sql:{lora_id}" for rid in sent}
        assert got["cmpl-base-0"] == ""
        assert "was never added" not in lora_server.log()
    finally:
        r = requests.post(url + "/v1/unload_lora_adapter", json={"lora_name": "sql"},
                          timeout=10)
    assert r.status_code == 200, r.text
    for _ in range(2):  # both workers
        with pytest.raises(openai.NotFoundError) as info:
            client.chat.completions.create(model="sql", max_tokens=1,
                                           messages=[{"role": "user", "content": "Hi"}])
        assert info.value.body["message"] == \
            "The model `sql` does not exist. Valid aliases: tiny."
        r = requests.post(url + "/v1/completions", timeout=10,
                          json={"model": "sql", "prompt": "x", "max_tokens": 1})
        assert r.status_code == 404 and r.json()["error"]["param"] == "model"
