"""Knowledge items, pure (seed designs 002-004): names, graph, provenance, BM25, relevance."""
