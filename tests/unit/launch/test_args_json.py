"""--args-json: honoured options become settings, engine and no-effect options pass, frontend
options greenfront lacks are refused together."""
from __future__ import annotations

import json
import re

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
        settings_from_args_json(json.dumps({"model_tag": "/m", "tool_server": "x",
                                            "enable_log_outputs": True,
                                            "tokenizer_mode": "mistral"}))
    assert sorted(info.value.names) == ["enable_log_outputs", "tokenizer_mode",
                                        "tool_server"]
    assert "--tool-server" in str(info.value)
    assert "--enable-log-outputs" in str(info.value)


def test_tool_and_reasoning_parser_flags_become_settings():
    settings = settings_from_args_json(json.dumps({
        "model_tag": "/m", "enable_auto_tool_choice": True, "tool_call_parser": "hermes",
        "tool_parser_plugin": "/p.py", "reasoning_parser": "qwen3"}))
    assert settings["GREENFRONT_ENABLE_AUTO_TOOL_CHOICE"] == "1"
    assert settings["GREENFRONT_TOOL_CALL_PARSER"] == "hermes"
    assert settings["GREENFRONT_TOOL_PARSER_PLUGIN"] == "/p.py"
    assert settings["GREENFRONT_REASONING_PARSER"] == "qwen3"


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


def test_admission_limits_become_settings():
    settings = settings_from_args_json(json.dumps({"model_tag": "/m", "max_num_queued_tokens": 4,
                                                   "max_num_queued_reqs": 8}))
    assert settings["GREENFRONT_MAX_NUM_QUEUED_REQS"] == "8"
    assert settings["GREENFRONT_MAX_NUM_QUEUED_TOKENS"] == "4"


def test_stream_interval_becomes_the_server_wide_setting():
    settings = settings_from_args_json(json.dumps({"model_tag": "/m", "stream_interval": 4}))
    assert settings["GREENFRONT_STREAM_INTERVAL"] == "4"


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


def test_lora_modules_become_the_setting_in_both_of_vllms_forms():
    from base.config import Config
    args = {"model_tag": "/m", "lora_modules": [
        {"name": "sql", "path": "/a/sql", "base_model_name": None, "is_3d_lora_weight": False}]}
    settings = settings_from_args_json(json.dumps(args))
    assert Config.from_env(settings).lora_modules == (("sql", "/a/sql", None, False),)
    # greenfront serve's command line: name=path items or JSON objects, as vLLM parses them
    from launch.args_json import HONOURED
    convert = HONOURED["lora_modules"][1]
    text = convert(["a=/p/a", '{"name": "b", "path": "/p/b", "base_model_name": "m"}'])
    assert Config.from_env({"GREENFRONT_LORA_MODULES": text}).lora_modules == (
        ("a", "/p/a", None, False), ("b", "/p/b", "m", False))
    with pytest.raises(UnsupportedOptions):
        settings_from_args_json(json.dumps({"model_tag": "/m", "lora_modules": [{"name": "x"}]}))


def test_frontend_options_become_settings():
    settings = settings_from_args_json(json.dumps({
        "model_tag": "/m", "return_tokens_as_token_ids": True,
        "exclude_tools_when_tool_choice_none": True, "sse_keep_alive_interval": 5,
        "uds": "/tmp/s.sock", "fingerprint_mode": "none"}))
    assert settings["GREENFRONT_RETURN_TOKENS_AS_TOKEN_IDS"] == "1"
    assert settings["GREENFRONT_EXCLUDE_TOOLS_WHEN_TOOL_CHOICE_NONE"] == "1"
    assert settings["GREENFRONT_SSE_KEEP_ALIVE_INTERVAL"] == "5"
    assert settings["GREENFRONT_SYSTEM_FINGERPRINT"] == ""
    with pytest.raises(UnsupportedOptions):
        settings_from_args_json(json.dumps({"model_tag": "/m", "sse_keep_alive_interval": -1}))


@pytest.mark.parametrize("buckets,message", [
    ({"request_latency": [0.5, 0.1]}, "custom_histogram_buckets['request_latency']: bounds "
                                      "[0.5, 0.1] must be strictly increasing"),
    ({"nope": [1]}, "custom_histogram_buckets: unknown bucket family 'nope'"),
    ({"request_tokens": []}, "bucket list must not be empty"),
    ({"request_tokens": [0, 1]}, "bound 0 must be finite and greater than 0"),
    ({"request_tokens": [True]}, "bound True must be a number, not a boolean"),
])
def test_custom_histogram_buckets_are_checked_as_vllm_does(buckets, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        settings_from_args_json(json.dumps({"model_tag": "/m",
                                            "custom_histogram_buckets": buckets}))
    good = settings_from_args_json(json.dumps({"model_tag": "/m", "custom_histogram_buckets": {
        "request_latency": [0.1, 1, 10]}}))
    assert json.loads(good["GREENFRONT_CUSTOM_HISTOGRAM_BUCKETS"]) == {
        "request_latency": [0.1, 1.0, 10.0]}


def test_per_request_metrics_need_log_stats_as_in_vllm():
    assert settings_from_args_json(json.dumps({
        "model_tag": "/m", "enable_per_request_metrics": True}))[
        "GREENFRONT_ENABLE_PER_REQUEST_METRICS"] == "1"
    with pytest.raises(ValueError, match="requires engine statistics logging; remove "
                                         "--disable-log-stats"):
        settings_from_args_json(json.dumps({"model_tag": "/m", "enable_per_request_metrics": True,
                                            "disable_log_stats": True}))


def test_pooling_runner_options_are_accepted_and_others_refused():
    """``vllm serve --runner pooling --convert embed|classify``: the engine pools and greenfront
    learns it from get_supported_tasks (docs/pooling.md §1); other runners are refused."""
    import json as _json
    from launch.args_json import UnsupportedOptions, settings_from_args_json
    for runner, convert in (("pooling", "embed"), ("pooling", "classify"), ("generate", "auto")):
        settings_from_args_json(_json.dumps({"model": "m", "runner": runner, "convert": convert}))
    with pytest.raises(UnsupportedOptions):
        settings_from_args_json(_json.dumps({"model": "m", "runner": "draft"}))
