"""`choirctl agent …`: lifecycle, build, verify and how agents are shown."""
