"""Agent sessions (§6.4, §13.1): start, leases, bindings, how they end and why."""
