"""POST /pooling (vLLM's raw pooling output of any pooling model, docs/pooling.md §2)."""
