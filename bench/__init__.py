"""greenfront's benchmark (``make bench``, ``python -m bench``); see bench/README.md.

Owns nothing at import time: ``__main__`` orchestrates, the load generator, prober and tokenizer
limit run as their own processes.

Runs on: the benchmark processes only (never imported by the server).
"""
