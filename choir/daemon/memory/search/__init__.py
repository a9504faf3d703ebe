"""Memory searches (§11.7): the query, BM25, relevance, the graph's filters, what may be read."""
