"""POST /score, /v1/score, /rerank, /v1/rerank, /v2/rerank (docs/pooling.md §2)."""
