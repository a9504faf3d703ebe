"""The operator's agent verbs: start, stop, restart, update, build, verify, models."""
