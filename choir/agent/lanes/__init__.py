"""The lanes (§7.2, §7.3): edge, the core jobs, and what they share."""
