"""Checking a home's config.json and secrets.json: every problem, with its JSON path."""
