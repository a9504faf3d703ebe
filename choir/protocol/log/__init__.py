"""The session log's vocabulary: events, committed records, the chain, snapshots, lanes."""
