"""choird's memory (§11, issue 15): everything choird stores, indexes and serves of agents' memory.

- `embedding/`: the embedding pipeline of §11.9 — the providers (the local wordllama default, an
  OpenAI-compatible endpoint), the queue and its batches, the breaker and backoff, the service
  choird holds, vectors written back per agent, and their usage rows;
- `search/`: a memory query checked before any SQL and sent to its search — BM25 (the in-memory
  index, pre-warmed at session start), relevance, the graph's filters — and the one read rule;
- `tools/`: the memory host tools choird serves over EXECUTE_HOST_TOOL (query, upsert, recall,
  expand, browse, the roll-up's sources) with the access rules;
- `closing/`: an ended session into memory — chunks, compaction archives, tool rows, the summary
  tree's branch and roots;
- `store`: the `MemoryStore` interface and `PostgresMemoryStore`, every call under the agent's
  own role; `access`: `MemoryGate`, memory classes checked; `keys`: the keys of encrypted
  memories, held in memory only; `health`: `memory stats`; `reembed`: switching embedding models.

The embedding modules import no store: vectors leave through a callback the store's user passes in.
"""
