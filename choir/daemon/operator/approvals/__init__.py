"""Approvals answered and applied (§8.10, §19.6): the verbs, the applies and their real edges."""
