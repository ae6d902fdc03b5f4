"""The `frontend` executable that `vllm serve` starts in place of vLLM's Rust frontend."""
