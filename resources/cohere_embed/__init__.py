"""POST /v2/embed (Cohere's embed API v2 on an embedding model, docs/pooling.md §2)."""
