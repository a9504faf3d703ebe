"""The wire: envelopes, verbs, payloads, pushes, error codes, versions, artifacts."""
