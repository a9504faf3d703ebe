"""choird's memory (§11): the embedding pipeline of §11.9 and its service, and stored sessions cut
into chunks; not yet offered to any tool or command, nor run at session close.

- `service`: `MemoryService`, what choird holds: built from config, it loads its provider at
  first use, flushes the queue on a ~100 ms timer, follows hot config reloads, answers query
  vectors within a timeout and drains (bounded) at shutdown; `service_guard` + `breaker` stop
  calling an endpoint that keeps failing;
- `chunks`: a session's stored events (and its summary) read back and cut into `MemoryChunk`s
  (`choir.core.memory.chunking`);
- `provider`: the `EmbeddingProvider` interface every embedder meets, and `Vector`;
- `openai_provider`: an OpenAI-compatible `/v1/embeddings` endpoint, batches of 32, retried with
  backoff (`backoff`), its answers checked (`openai_response`) before anything is stored;
- `local_provider`: the embedded default, `wordllama` (256 dims, weights inside its wheel);
- `queue`: `EmbeddingQueue`, flushed when a batch is full or on the heartbeat tick; a chunk whose
  embedding fails gets no vector, never an exception (`batching` holds its state).

- `store`: the `MemoryStore` interface and `PostgresMemoryStore` (knowledge, session chunks,
  vectors, promotion, stats), every call under the agent's own role; `search`: `MemoryQuery`,
  its checks and modes.

The embedding modules import no store: vectors leave through a callback the store's user passes in.
"""
