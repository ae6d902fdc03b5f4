"""gRPC beside the HTTP options: with ``--ssl-certfile`` the gRPC port speaks TLS with the same
certificate (ALPN h2), as vLLM's Rust frontend does; ``--api-key`` guards HTTP only, as vLLM's
Rust frontend leaves its gRPC services unguarded."""
from __future__ import annotations

import subprocess

import grpc
import requests

from rpc.proto import health_pb2 as h, inference_pb2 as pb
from tests.integration.harness import GreenfrontServer, wait_for
from tests.support.processes import free_port


def test_tls_and_api_key(model_dir, tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    port = free_port()
    srv = GreenfrontServer(model_dir, sim_args="--output-mode echo", env={
        "GREENFRONT_SSL_KEYFILE": str(key), "GREENFRONT_SSL_CERTFILE": str(cert),
        "GREENFRONT_API_KEY": "secret", "GREENFRONT_GRPC_PORT": str(port)}).launch()
    try:
        https = srv.url.replace("http://", "https://")

        def up() -> bool:
            try:
                return requests.get(https + "/health", verify=str(cert), timeout=5).ok
            except requests.RequestException:
                return False
        assert wait_for(up, timeout=60), srv.log()
        credentials = grpc.ssl_channel_credentials(cert.read_bytes())
        with grpc.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
            check = channel.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=h.HealthCheckRequest.SerializeToString,
                response_deserializer=h.HealthCheckResponse.FromString)
            assert check(h.HealthCheckRequest(), timeout=10).status == \
                h.HealthCheckResponse.SERVING
            generate = channel.unary_unary(
                "/vllm.Inference/Generate", request_serializer=pb.GenerateRequest.SerializeToString,
                response_deserializer=pb.GenerateResponse.FromString)
            answer = generate(pb.GenerateRequest(text="Hi", stopping=pb.StoppingCriteria(
                max_new_tokens=2)), timeout=10)  # no API key: gRPC is not guarded
            assert answer.outputs.finish_info.num_output_tokens == 2
        assert requests.get(https + "/v1/models", verify=str(cert), timeout=5).status_code == 401
    finally:
        srv.stop_later()
