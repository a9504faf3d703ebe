"""How choirctl shows things: tables, JSON, durations, visible control characters."""
