"""Resuming a session (§13.2, §13.4): the handover, the ledger, snapshots."""
