"""Core jobs (§7.1, §7.3, §12.7): edge's tools for them, the job task, its event stream."""
