"""gRPC: vLLM's ``vllm.Inference`` and ``vllm.Control`` services and ``grpc.health.v1.Health``,
served over HTTP/2 (``h2``) on gevent sockets in each worker's HTTP hub (docs/grpc.md)."""
