"""What agents run (§6.5, §17.3): repos, the merged /choir tree, the base and agent images."""
