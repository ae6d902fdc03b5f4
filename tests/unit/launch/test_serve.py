"""greenfront serve: vllm serve's options, through the same table as --args-json."""
from __future__ import annotations

import subprocess
import sys

import pytest

from launch.args_json import UnsupportedOptions
from launch.frontend import ROOT, build_parser
from launch.serve import serve_settings


def _settings(*argv: str) -> dict[str, str]:
    ns, extra = build_parser().parse_known_args(["serve", *argv])
    return serve_settings(ns, extra)


def test_options_mean_what_they_mean_in_args_json():
    settings = _settings("/m", "--host", "127.0.0.1", "--port", "9001", "--served-model-name",
                         "a", "b", "--api-key", "k1", "--max-model-len", "512",
                         "--disable-log-stats", "--shutdown-timeout", "30")
    assert settings["GREENFRONT_MODEL"] == "/m"
    assert settings["GREENFRONT_BIND"] == "127.0.0.1:9001"
    assert settings["GREENFRONT_SERVED_MODEL_NAME"] == "a,b"
    assert settings["GREENFRONT_API_KEY"] == "k1"
    assert settings["GREENFRONT_MAX_MODEL_LEN"] == "512"
    assert settings["GREENFRONT_LOG_STATS"] == "0"
    assert settings["GREENFRONT_SHUTDOWN_TIMEOUT"] == "30"


def test_cors_options_take_json_as_in_vllm():
    settings = _settings("/m", "--allowed-origins", '["https://a", "https://b"]',
                         "--allow-credentials", "--enable-request-id-headers")
    assert settings["GREENFRONT_ALLOWED_ORIGINS"] == '["https://a", "https://b"]'
    assert settings["GREENFRONT_ALLOW_CREDENTIALS"] == "1"
    assert settings["GREENFRONT_ENABLE_REQUEST_ID_HEADERS"] == "1"


def test_defaults_bind_every_interface_on_8000_and_name_the_model_after_its_path():
    settings = _settings("/m")
    assert settings["GREENFRONT_BIND"] == "0.0.0.0:8000"
    assert settings["GREENFRONT_SERVED_MODEL_NAME"] == "/m"


def test_external_engines_and_workers():
    settings = _settings("/m", "--engine", "external", "--handshake-address",
                         "tcp://0.0.0.0:13345", "--data-parallel-size", "2", "--workers", "2")
    assert settings["GREENFRONT_ENGINE"] == "external"
    assert settings["GREENFRONT_HANDSHAKE_ADDRESS"] == "tcp://0.0.0.0:13345"
    assert settings["GREENFRONT_ENGINE_COUNT"] == "2"
    assert settings["GREENFRONT_WORKERS"] == "2"


def test_unimplemented_frontend_options_are_refused_together():
    with pytest.raises(UnsupportedOptions) as info:
        _settings("/m", "--tool-server", "x", "--enable-log-outputs")
    assert info.value.names == ["enable_log_outputs", "tool_server"]


def test_options_nobody_knows_are_refused():
    with pytest.raises(ValueError, match="--tensor-parallel-size"):
        _settings("/m", "--tensor-parallel-size", "2")


def test_refusal_exits_2_with_the_option_named():
    proc = subprocess.run([f"{ROOT}/bin/greenfront", "serve", "/m",
                           "--enable-log-outputs"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--enable-log-outputs" in proc.stderr
    # Not a vLLM 0.32 option at all (vllm serve exits 2 too).
    proc = subprocess.run([f"{ROOT}/bin/greenfront", "serve", "/m", "--reasoning-effort-map",
                           "x"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--reasoning-effort-map" in proc.stderr


def test_uds_and_no_switches():
    settings = _settings("/m", "--uds", "/tmp/s.sock", "--return-tokens-as-token-ids",
                         "--no-return-tokens-as-token-ids")
    assert settings["GREENFRONT_BIND"] == "unix:/tmp/s.sock"
    assert settings["GREENFRONT_RETURN_TOKENS_AS_TOKEN_IDS"] == "0"


def test_grpc_port():
    """gRPC (docs/grpc.md): --grpc-port standalone, the inherited socket under vllm serve."""
    assert _settings("/m", "--grpc-port", "50051")["GREENFRONT_GRPC_PORT"] == "50051"
    from launch.frontend import launch_settings

    ns = build_parser().parse_args([
        "frontend", "--listen-fd", "3", "--input-listener-fd", "4", "--output-listener-fd", "5",
        "--grpc-listen-fd", "6", "--args-json", '{"model_tag": "/m", "grpc_port": 50051}'])
    settings = launch_settings(ns)
    assert settings["GREENFRONT_GRPC_LISTEN_FD"] == "6"
    assert "GREENFRONT_GRPC_PORT" not in settings
