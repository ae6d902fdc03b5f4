"""/tokenize and /detokenize: request conversion and response bytes (``convert``).

Runs on: request pool threads.
"""
from resources.tokenize.convert import detokenize, tokenize

__all__ = ["detokenize", "tokenize"]
