"""What the pooling endpoints share: field tables, pooling params, the gather of one engine request
per input, the encodings and usage (docs/pooling.md)."""
