"""The lock table (§9): locksets and the pure FREE/S/X table."""
