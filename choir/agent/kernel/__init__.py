"""The deterministic kernel of choir-agent (§7.4, §8, §9): log, locks, registry, arbiter."""
