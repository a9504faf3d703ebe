"""The confinement of agents as data (§15.3): container and sandbox profiles, host checks."""
