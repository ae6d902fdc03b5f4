"""Config: one reader of the environment; bad values warn and fall back."""
from __future__ import annotations

import logging

from config import REQUEST_THREADS_CAP, Config


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
                               "GREENFRONT_TOKENIZER_BACKEND": "sentencepiece"})
    assert cfg.zmq_threads == 4 and cfg.offload is True and cfg.tokenizer_backend == "fastokens"
    assert cfg.request_threads >= 1
    text = caplog.text
    for name in ("GREENFRONT_REQUEST_WORKER_THREADS", "GREENFRONT_ZMQ_WORKER_THREADS",
                 "GREENFRONT_OFFLOAD", "GREENFRONT_TOKENIZER_BACKEND"):
        assert name in text


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


def test_structured_outputs_backend_and_template_kwargs(caplog):
    cfg = Config.from_env({"GREENFRONT_STRUCTURED_OUTPUTS_BACKEND": "outlines",
                           "GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS": '{"enable_thinking": false}'})
    assert cfg.structured_outputs_backend == "outlines"
    assert cfg.default_chat_template_kwargs == {"enable_thinking": False}
    bad = Config.from_env({"GREENFRONT_STRUCTURED_OUTPUTS_BACKEND": "xgrammarr",
                           "GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS": "[1]"})
    assert bad.structured_outputs_backend == "auto" and bad.default_chat_template_kwargs == {}
    assert "GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS" in caplog.text
