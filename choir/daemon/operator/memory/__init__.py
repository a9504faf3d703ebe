"""The operator's memory and knowledge verbs (§11, issue 15): search, curation, backfills."""
