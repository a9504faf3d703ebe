"""Knowledge, tier 4 (§11.6, §23.3): named, versioned items, the graph, the summary tree."""
