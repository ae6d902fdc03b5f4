"""Config: one reader of the environment; bad values warn and fall back."""
from __future__ import annotations

import logging

import pytest

from base import config
from base import host
from base.config import REQUEST_THREADS_CAP, Config
from base.settings_page import SETTINGS_PAGE, page_with_table


def test_defaults_without_environment():
    cfg = Config.from_env({})
    assert cfg.offload is True
    assert 1 <= cfg.request_threads <= REQUEST_THREADS_CAP
    assert cfg.zmq_threads == 4
    assert cfg.engine_mode == "sim"
    assert cfg.model_names == (cfg.model,)


def test_request_threads_are_capped_and_fall_back_to_vllm_rs_names():
    assert Config.from_env({"GREENFRONT_REQUEST_WORKER_THREADS": "500"}).request_threads == 32
    assert Config.from_env({"VLLM_RS_REQUEST_WORKER_THREADS": "3"}).request_threads == 3
    assert Config.from_env({"VLLM_RS_ZMQ_WORKER_THREADS": "2"}).zmq_threads == 2
    both = {"GREENFRONT_ZMQ_WORKER_THREADS": "6", "VLLM_RS_ZMQ_WORKER_THREADS": "2"}
    assert Config.from_env(both).zmq_threads == 6


def test_invalid_values_are_logged_and_ignored(caplog):
    with caplog.at_level(logging.WARNING, logger="greenfront.config"):
        cfg = Config.from_env({"GREENFRONT_REQUEST_WORKER_THREADS": "zero",
                               "GREENFRONT_ZMQ_WORKER_THREADS": "-1",
                               "GREENFRONT_OFFLOAD": "maybe",
                               "GREENFRONT_TOKENIZER_BACKEND": "sentencepiece",
                               "GREENFRONT_GC_THRESHOLD": "700,10"})
    assert cfg.zmq_threads == 4 and cfg.offload is True and cfg.tokenizer_backend == "fastokens"
    assert cfg.gc_threshold == config.GC_THRESHOLD_DEFAULT
    assert cfg.request_threads >= 1
    text = caplog.text
    for name in ("GREENFRONT_REQUEST_WORKER_THREADS", "GREENFRONT_ZMQ_WORKER_THREADS",
                 "GREENFRONT_OFFLOAD", "GREENFRONT_TOKENIZER_BACKEND", "GREENFRONT_GC_THRESHOLD"):
        assert name in text


def test_gc_threshold_takes_three_numbers():
    assert Config.from_env({"GREENFRONT_GC_THRESHOLD": "700,10,10"}).gc_threshold == (700, 10, 10)
    assert Config.from_env({"GREENFRONT_GC_THRESHOLD": "0,0,0"}).gc_threshold == (0, 0, 0)


def test_offload_switch_and_served_names():
    cfg = Config.from_env({"GREENFRONT_OFFLOAD": "0", "GREENFRONT_SERVED_MODEL_NAME": "a, b"})
    assert cfg.offload is False
    assert cfg.model_names == ("a", "b")


def test_worker_sockets_are_ipc_paths_unless_engines_handshake_over_tcp():
    ipc = Config.from_env({"GREENFRONT_RUN_DIR": "/run/gf"})
    assert ipc.worker_address("in", 1) == ("ipc:///run/gf/in-1.sock",) * 2
    tcp = Config.from_env({"GREENFRONT_HANDSHAKE_ADDRESS": "tcp://10.1.2.3:13345"})
    assert tcp.worker_address("in", 0) == ("tcp://10.1.2.3:13346",) * 2
    assert tcp.worker_address("out", 1) == ("tcp://10.1.2.3:13349",) * 2
    wild = Config.from_env({"GREENFRONT_HANDSHAKE_ADDRESS": "tcp://0.0.0.0:13345",
                            "GREENFRONT_ENGINE_HOST": "gf.example"})
    assert wild.worker_address("out", 0) == ("tcp://*:13347", "tcp://gf.example:13347")
    guessed = Config.from_env({"GREENFRONT_HANDSHAKE_ADDRESS": "tcp://*:13345"})
    bind, connect = guessed.worker_address("in", 0)
    assert bind == "tcp://*:13346" and connect.endswith(":13346") and "*" not in connect


def test_settings_page_table_is_made_from_the_declarations():
    """Regenerate with ``.venv/bin/python -m base.settings_page`` after declaring a setting."""
    with open(SETTINGS_PAGE, encoding="utf-8") as f:
        text = f.read()
    assert page_with_table(text) == text
    for _, decl in Config.settings():
        assert f"| `{decl.env[0]}`" in text


def test_every_field_is_a_declared_setting_with_a_description():
    for name, decl in Config.settings():
        assert decl.env and decl.doc, name
        assert getattr(Config.from_env({}), name) == decl.default, name


def test_fallback_names_and_derived_values():
    cfg = Config.from_env({"VLLM_API_KEY": "a,b", "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "9",
                           "GREENFRONT_GENERATION_CONFIG": "vllm", "HF_HOME": "/h",
                           "GREENFRONT_ENGINE": "launched", "VLLM_MAX_N_SEQUENCES": "3"})
    assert cfg.api_keys == ("a", "b") and cfg.keepalive == 9 and cfg.max_n == 3
    assert cfg.use_generation_config is False and cfg.hf_hub_cache == "/h/hub"
    assert cfg.exit_on_engine_death is True
    kept = Config.from_env({"GREENFRONT_ENGINE": "launched",
                            "VLLM_KEEP_ALIVE_ON_ENGINE_DEATH": "1"})
    assert kept.exit_on_engine_death is False
    assert Config.from_env({"GREENFRONT_ENGINE": "sim"}).exit_on_engine_death is False
    assert Config.from_env({"GREENFRONT_SYSTEM_FINGERPRINT": ""}).system_fingerprint is None
    assert Config.from_env({"GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS": '{"a": 1}'}
                           ).default_chat_template_kwargs == {"a": 1}


def test_server_info_view_redacts_secrets_and_lists_vllm_names():
    cfg = Config.from_env({"GREENFRONT_API_KEY": "sekrit", "VLLM_SERVER_DEV_MODE": "1",
                           "VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES": "/a,/b"})
    data = cfg.redacted()
    assert data["api_keys"] == "<redacted>" and "sekrit" not in str(data)
    assert set(data) == {name for name, _ in Config.settings()}
    env = cfg.vllm_env()
    assert env["VLLM_SERVER_DEV_MODE"] is True
    assert env["VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES"] == "/a,/b"
    assert "VLLM_API_KEY" not in env


def test_structured_outputs_backend_and_template_kwargs(caplog):
    cfg = Config.from_env({"GREENFRONT_STRUCTURED_OUTPUTS_BACKEND": "outlines",
                           "GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS": '{"enable_thinking": false}'})
    assert cfg.structured_outputs_backend == "outlines"
    assert cfg.default_chat_template_kwargs == {"enable_thinking": False}
    bad = Config.from_env({"GREENFRONT_STRUCTURED_OUTPUTS_BACKEND": "xgrammarr",
                           "GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS": "[1]"})
    assert bad.structured_outputs_backend == "auto" and bad.default_chat_template_kwargs is None
    assert "GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS" in caplog.text


@pytest.mark.parametrize("cpus,memory,workers", [
    (2, 24 << 30, 2),      # this project's VM: every core
    (64, 256 << 30, host.WORKERS_CAP),
    (8, 1 << 30, 2),       # 1 GiB available: half of it at 256 MB a worker
    (4, 100 << 20, 1),
    (3, None, 3),          # no /proc/meminfo
])
def test_default_worker_count_follows_cpus_then_memory(monkeypatch, cpus, memory, workers):
    monkeypatch.setattr(host, "usable_cpus", lambda: cpus)
    monkeypatch.setattr(host, "available_memory", lambda: memory)
    assert host.default_worker_count() == workers
