"""Text side of greenfront: tokenizer, chat template, incremental detokenizer, model directory.

Everything here reproduces the text behaviour of vLLM 0.32's Python frontend byte for byte
(see docs/text-parity.md). The modules are independent of gevent and falcon.

Runs on: request pool threads (tokenize, render, detokenizer creation) and the HTTP hub
(detokenizer updates); each module's docstring says which.
"""
