"""``vllm.Inference``: ``Generate`` and ``GenerateStream`` (docs/grpc.md §3)."""
