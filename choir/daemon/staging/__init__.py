"""Two-phase configuration (§16.3, §17.6): load stages, diff shows, apply publishes."""
