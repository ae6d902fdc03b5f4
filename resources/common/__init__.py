"""What the completions and chat endpoints share: the serving context, request-field coercion,
SamplingParams building, prepared engine requests, per-request output state and the SSE writer.

Runs on: see each module (conversion on request pool threads, output/sse on the HTTP hub).
"""
