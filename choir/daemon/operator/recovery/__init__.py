"""The recovery inbox (issue 19) and session recovery: what waits for a human after a crash."""
