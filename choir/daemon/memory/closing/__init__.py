"""An ended session into memory (§11.8 6-7): chunks, archives, tool rows, the summary tree."""
