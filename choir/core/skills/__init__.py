"""Skills (§10): the registry and the pure skill runner."""
