"""Which agents' stored vectors are of the configured embedding model, in the running choird.

    models = VectorModels(EmbeddingModel("local", 256))
    models.record("ada", stored)          # at start: what `ensure_agent_schema` found
    models.current("ada")                 # False: semantic search answers by text
    models.record("ada", models.configured)   # a re-embed switched it

An agent is *stale* when its vectors came from another model (the model or its dimensions were
changed in config.json and choird restarted): its query vectors and stored ones cannot be
compared, so its memory is searched by text, no new vector is written next to the old ones, and
`choirctl memory reembed <agent>` is what makes it current. An agent added by `config apply`
is recorded then, with the schema made for the configured model.
"""

from __future__ import annotations

from choir.store.memory.embedding_model import EmbeddingModel


class VectorModels:
    """The stored vectors' model per agent, against the configured one."""

    def __init__(self, configured: EmbeddingModel) -> None:
        self.configured = configured
        self._stored: dict[str, EmbeddingModel] = {}

    def record(self, agent_id: str, stored: EmbeddingModel) -> None:
        """The agent's vectors are now `stored`'s."""
        self._stored[agent_id] = stored

    def stored(self, agent_id: str) -> EmbeddingModel:
        """The model of the agent's vectors (the configured one unless recorded otherwise)."""
        return self._stored.get(agent_id, self.configured)

    def current(self, agent_id: str) -> bool:
        """Whether the agent's vectors can be searched with the configured model's queries."""
        return self.stored(agent_id) == self.configured

    def stale(self) -> dict[str, EmbeddingModel]:
        """The agents waiting for a re-embed, with their vectors' model."""
        return {a: m for a, m in self._stored.items() if m != self.configured}
