"""POST /inference/v1/generate: vLLM's token-in/token-out endpoint (``types``, ``validate``,
``convert``, ``render``, ``resource``, as the completions endpoint splits them).

Runs on: see each module (conversion on request pool threads, rendering on the HTTP hub).
"""
