"""Working memory (§11.3): what a lane remembers and how it is folded."""
