"""--args-json: honoured options become settings, engine and no-effect options pass, frontend
options greenfront lacks are refused together."""
from __future__ import annotations

import json

import pytest

from launch.args_json import UnsupportedOptions, settings_from_args_json


def test_honoured_options_become_settings_and_engine_options_are_ignored():
    settings = settings_from_args_json(json.dumps({
        "model_tag": "/m", "served_model_name": ["a", "b"], "disable_log_stats": True,
        "tensor_parallel_size": 2, "enable_scale_out": True}))
    assert settings["GREENFRONT_MODEL"] == "/m"
    assert settings["GREENFRONT_SERVED_MODEL_NAME"] == "a,b"
    assert settings["GREENFRONT_LOG_STATS"] == "0"
    assert not any("TENSOR" in k or "SCALE" in k for k in settings)


def test_unimplemented_frontend_options_are_refused_in_one_message():
    with pytest.raises(UnsupportedOptions) as info:
        settings_from_args_json(json.dumps({"model_tag": "/m", "tool_call_parser": "x",
                                            "root_path": "/p", "tokenizer_mode": "mistral"}))
    assert sorted(info.value.names) == ["root_path", "tokenizer_mode", "tool_call_parser"]
    assert "--tool-call-parser" in str(info.value) and "--root-path" in str(info.value)


def test_frontend_behaviour_engine_options_are_refused_not_ignored():
    with pytest.raises(UnsupportedOptions) as info:
        settings_from_args_json(json.dumps({"model_tag": "/m", "stream_interval": 4,
                                            "max_num_queued_reqs": 8}))
    assert info.value.names == ["max_num_queued_reqs", "stream_interval"]


def test_http_options_become_settings():
    settings = settings_from_args_json(json.dumps({
        "model_tag": "/m", "allowed_origins": ["https://a"], "allow_credentials": True,
        "enable_request_id_headers": True, "ssl_keyfile": "k.pem", "ssl_certfile": "c.pem",
        "shutdown_timeout": 30}))
    assert settings["GREENFRONT_ALLOWED_ORIGINS"] == '["https://a"]'
    assert settings["GREENFRONT_ALLOW_CREDENTIALS"] == "1"
    assert settings["GREENFRONT_ENABLE_REQUEST_ID_HEADERS"] == "1"
    assert settings["GREENFRONT_SSL_KEYFILE"] == "k.pem"
    assert settings["GREENFRONT_SHUTDOWN_TIMEOUT"] == "30"
