"""Session memory, tiers 2-3 (§11.4-11.5, §23.2-23.4): chunks, vectors, search, closes, stats."""
