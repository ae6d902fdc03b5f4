"""POST /v1/embeddings (OpenAI's embeddings API on an embedding model, docs/pooling.md §2)."""
