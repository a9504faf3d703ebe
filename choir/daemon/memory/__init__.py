"""choird's memory (§11): for now the embedding pipeline of §11.9, not yet wired to any tool,
command or session close.

- `provider`: the `EmbeddingProvider` interface every embedder meets, and `Vector`;
- `openai_provider`: an OpenAI-compatible `/v1/embeddings` endpoint, batches of 32, retried with
  backoff (`backoff`), its answers checked (`openai_response`) before anything is stored;
- `local_provider`: the embedded default, `wordllama` (256 dims, weights inside its wheel);
- `queue`: `EmbeddingQueue`, flushed when a batch is full or on the heartbeat tick; a chunk whose
  embedding fails gets no vector and one warning, never an exception (`batching` holds its state).

- `store`: the `MemoryStore` interface and `PostgresMemoryStore` (knowledge, session chunks,
  vectors, promotion, stats), every call under the agent's own role; `search`: `MemoryQuery`,
  its checks and modes.

The embedding modules import no store: results leave through a callback the memory store's
user passes in.
"""
