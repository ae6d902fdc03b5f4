"""The three tiers' plumbing: the request pool, the engine-I/O thread and the hand-off between hubs."""
