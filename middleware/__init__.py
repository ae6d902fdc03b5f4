"""Cross-cutting request handling: offload to the pool, errors → OpenAI envelope, auth."""
