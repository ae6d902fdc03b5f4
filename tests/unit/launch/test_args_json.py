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
                                            "ssl_keyfile": "k", "tokenizer_mode": "mistral"}))
    assert sorted(info.value.names) == ["ssl_keyfile", "tokenizer_mode", "tool_call_parser"]
    assert "--tool-call-parser" in str(info.value) and "--ssl-keyfile" in str(info.value)


def test_structured_outputs_backend_and_default_template_kwargs_become_settings():
    settings = settings_from_args_json(json.dumps({
        "model_tag": "/m", "structured_outputs_config": {
            "backend": "guidance", "disable_any_whitespace": False, "enable_in_reasoning": False},
        "default_chat_template_kwargs": {"enable_thinking": False}}))
    assert settings["GREENFRONT_STRUCTURED_OUTPUTS_BACKEND"] == "guidance"
    assert json.loads(settings["GREENFRONT_DEFAULT_CHAT_TEMPLATE_KWARGS"]) == {
        "enable_thinking": False}
    auto = settings_from_args_json(json.dumps({"model_tag": "/m",
                                               "structured_outputs_config": {"backend": "auto"}}))
    assert "GREENFRONT_STRUCTURED_OUTPUTS_BACKEND" not in auto
