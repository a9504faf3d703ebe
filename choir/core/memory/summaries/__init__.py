"""The summary tree, pure (seed designs 002, 004): archives, session summaries, roll-ups."""
