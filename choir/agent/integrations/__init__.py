"""Tools that reach an outside service with a secret of the session's (§8.7, §18.3)."""
