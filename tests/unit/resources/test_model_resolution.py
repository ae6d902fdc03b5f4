"""Model names: ServingContext.resolve_model (served names, runtime LoRA adapters, vLLM's 404),
what conversion carries to the engine request, and the adapter registry's per-request read
(cached per file version, shared by workers through the run dir)."""
from __future__ import annotations

import dataclasses
import json
import os
import threading
import time

import msgspec
import pytest

from engine.protocol import EngineCoreRequest, LoRARequest, encode_add
from base.errors import ApiError, ModelNotFound
from base.jsonio import dumps
from runtime.lora_registry import LoraRegistry
from resources.chat.convert import prepare_chat
from resources.completions.convert import prepare_completion
from resources.generate.convert import prepare_generate
from resources.tokenize import detokenize, tokenize
from streaming.submit import start_generation

NOT_FOUND = ('{"error":{"message":"The model `%s` does not exist. Valid aliases: tiny.",'
             '"type":"NotFoundError","param":"model","code":404}}')
CHAT = [{"role": "user", "content": "Hi"}]


def load(registry: LoraRegistry, name: str, path: str, **flags) -> None:
    """What /v1/load_lora_adapter does to the registry when the engines took the adapter."""
    adapter, previous = registry.begin_load(name, path, flags.get("load_inplace", False),
                                            flags.get("is_3d", False))
    registry.end_load(adapter, previous, True)


def unload(registry: LoraRegistry, name: str) -> None:
    registry.end_unload(registry.begin_unload(name), True)


def age(registry: LoraRegistry, seconds: float = 10.0) -> None:
    """Make the registry file's current version old enough to be cached."""
    past = time.time() - seconds
    os.utime(registry._path, (past, past))


@pytest.fixture
def registry(tmp_path) -> LoraRegistry:
    return LoraRegistry(str(tmp_path))


@pytest.fixture
def lctx(ctx, registry):
    """The test context with a runtime adapter "sql" (id 1) loaded."""
    load(registry, "sql", "/adapters/sql")
    return dataclasses.replace(ctx, adapters=registry)


def not_found(call, name: str) -> None:
    with pytest.raises(ApiError) as info:
        call()
    assert isinstance(info.value, ModelNotFound)
    assert dumps(info.value.to_envelope()).decode() == NOT_FOUND % name


# -- resolve_model -------------------------------------------------------------------------------
def test_base_model_names(lctx):
    for name in (None, "", "tiny"):
        assert lctx.resolve_model(name) is None
    assert lctx.response_model(None) == "tiny"


def test_adapter_name_is_its_lora_request(lctx):
    lora = lctx.resolve_model("sql")
    assert lora == LoRARequest("sql", 1, "/adapters/sql", None, False, False)
    assert lctx.response_model(lora) == "sql"


def test_unknown_names_are_vllms_404(ctx, lctx):
    not_found(lambda: lctx.resolve_model("nope"), "nope")
    # Without runtime LoRA updating (no adapters), an adapter's name is unknown too.
    not_found(lambda: ctx.resolve_model("sql"), "sql")
    not_found(lambda: ctx.check_model("sql"), "sql")


def test_adapter_being_loaded_is_unknown_until_the_engines_took_it(lctx, registry):
    adapter, previous = registry.begin_load("late", "/adapters/late", False, False)
    not_found(lambda: lctx.resolve_model("late"), "late")
    registry.end_load(adapter, previous, True)
    assert lctx.resolve_model("late").lora_int_id == 2


def test_unloaded_adapter_is_404_again(lctx, registry):
    assert lctx.resolve_model("sql") is not None
    unload(registry, "sql")
    not_found(lambda: lctx.resolve_model("sql"), "sql")


# -- conversion to the engine request ------------------------------------------------------------
def test_completion_names_the_adapter(lctx):
    p = prepare_completion({"model": "sql", "prompt": ["a", "b"], "max_tokens": 2, "n": 2}, lctx)
    assert p.model == "sql" and p.lora_request == lctx.resolve_model("sql")
    base = prepare_completion({"model": "tiny", "prompt": "a", "max_tokens": 2}, lctx)
    assert base.model == "tiny" and base.lora_request is None


def test_chat_names_the_adapter(lctx):
    p = prepare_chat({"model": "sql", "messages": CHAT, "max_tokens": 2}, lctx)
    assert p.model == "sql" and p.lora_request.lora_name == "sql"
    assert prepare_chat({"messages": CHAT}, lctx).lora_request is None


def test_generate_names_the_adapter(lctx):
    p = prepare_generate({"model": "sql", "token_ids": [1, 22177], "sampling_params": {}}, lctx)
    assert p.model == "sql" and p.lora_request.lora_int_id == 1


def test_tokenize_and_detokenize_accept_an_adapter(lctx):
    assert tokenize({"model": "sql", "prompt": "Hello world"}, lctx) == \
        tokenize({"model": "tiny", "prompt": "Hello world"}, lctx)
    assert tokenize({"model": "sql", "messages": CHAT}, lctx).startswith(b'{"count":4,')
    assert detokenize({"model": "sql", "tokens": [22177, 4304]}, lctx) == \
        b'{"prompt":"Hello world"}'
    not_found(lambda: tokenize({"model": "nope", "prompt": "x"}, lctx), "nope")
    not_found(lambda: detokenize({"model": "nope", "tokens": [1]}, lctx), "nope")


@pytest.mark.parametrize("kind", ["completion", "chat"])
@pytest.mark.parametrize("stream", [False, True])
def test_responses_carry_the_adapter_name(run, lctx, kind, stream):
    body = {"model": "sql", "max_tokens": 2, "stream": stream,
            **({"prompt": "x"} if kind == "completion" else {"messages": CHAT})}
    out = run(kind, body, [1044, 1044], context=lctx)
    assert b'"model":"sql"' in out and b'"model":"tiny"' not in out


class FakeClient:
    client_index = 0

    def __init__(self) -> None:
        self.sent: list[EngineCoreRequest] = []

    def new_request_id(self, base: str) -> str:
        return f"{base}-x"

    def submit(self, request: EngineCoreRequest, waker, group=None) -> object:
        self.sent.append(request)
        return object()


def test_every_engine_request_carries_the_lora_request(lctx):
    client = FakeClient()
    prepared = prepare_completion({"model": "sql", "prompt": "x", "max_tokens": 2, "n": 2}, lctx)
    start_generation(prepared, client)
    assert [r.lora_request for r in client.sent] == [prepared.lora_request] * 2
    # On the wire: element 6 of the ADD array is the LoRARequest array.
    frames = encode_add(b"\x00\x00", client.sent[0])
    array = msgspec.msgpack.decode(frames[2])
    assert array[6] == ["sql", 1, "/adapters/sql", None, False, False]
    client = FakeClient()
    start_generation(prepare_completion({"prompt": "x", "max_tokens": 2}, lctx), client)
    assert client.sent[0].lora_request is None


# -- the registry's per-request read -------------------------------------------------------------
def test_read_is_cached_per_file_version(registry):
    load(registry, "a", "/a")
    fresh = registry._view()
    # Just written: the file's time could be shared by a next version, so it is re-read.
    assert fresh.key is None and registry._view() is not fresh
    age(registry)
    cached = registry._view()
    assert cached.key is not None and registry._view() is cached
    assert registry.lora_request("a") is registry.lora_request("a")  # one shared struct


def test_other_workers_changes_are_seen(tmp_path):
    mine, other = LoraRegistry(str(tmp_path)), LoraRegistry(str(tmp_path))
    load(other, "a", "/a")
    age(other)
    assert mine.lora_request("a").lora_int_id == 1
    load(other, "b", "/b")
    assert mine.lora_request("b").lora_int_id == 2
    age(other)
    assert [a.name for a in mine.adapters()] == ["a", "b"]
    unload(other, "a")
    age(other)
    assert mine.lora_request("a") is None and mine.lora_request("b").lora_path == "/b"


def test_same_size_rewrite_in_the_same_tick_is_not_missed(registry):
    """A version written within a clock tick of the cached one can have the same inode number,
    mtime and size; the recent-write rule keeps it from being taken for the cached one."""
    path = registry._path
    state = {"next_id": 2, "adapters": {"a": {"id": 1, "path": "/a", "loaded": True}}}
    with open(path, "w") as f:
        json.dump(state, f)
    now = time.time()
    os.utime(path, (now, now))
    assert registry.lora_request("a") is not None
    state["adapters"] = {"b": {"id": 1, "path": "/b", "loaded": True}}  # same length
    with open(path, "w") as f:  # in place: same inode
        json.dump(state, f)
    os.utime(path, (now, now))
    assert registry.lora_request("a") is None and registry.lora_request("b") is not None


def test_no_file_and_memory_registry(tmp_path):
    assert LoraRegistry(str(tmp_path)).lora_request("a") is None
    memory = LoraRegistry("")
    load(memory, "a", "/a")
    assert memory.lora_request("a").lora_path == "/a"
    unload(memory, "a")
    assert memory.lora_request("a") is None


def test_concurrent_readers_and_a_writer(tmp_path):
    """Readers on native threads (as request-pool threads are) while another worker loads and
    unloads: every read sees a consistent version, none fails."""
    reader, writer = LoraRegistry(str(tmp_path)), LoraRegistry(str(tmp_path))
    load(writer, "stable", "/s")
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                assert reader.lora_request("stable").lora_path == "/s"
                reader.lora_request("flip")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    for _ in range(30):
        load(writer, "flip", "/f")
        unload(writer, "flip")
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert reader.lora_request("flip") is None
