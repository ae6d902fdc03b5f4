"""POST /classify (a classification model's label probabilities, docs/pooling.md §2)."""
