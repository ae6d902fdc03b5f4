"""The response side of a generation: engine streams → detokenized, rendered HTTP bodies."""
