"""Prompt assembly (§11.3, seed 000): the layout, its text, the working-memory window."""
