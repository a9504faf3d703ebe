"""Approvals (§8.10, §19.6): the pending proposals, their audit trail and their applies."""
