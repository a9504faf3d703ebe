"""config.json's memory sections: `agents.<id>.memories`, the memories an agent attaches, each
with a role, and `relevance`, the weights of knowledge relevance search (design 004's formula).

    "memories": [
        {"class": "personal", "role": "read"},
        {"agent": "bob", "class": "app", "role": "read-write"},
        {"agent": "bob", "class": "knowledge", "role": "read"}
    ]

`agent` (default: the agent itself) owns the memory; `class` is one of system, knowledge, app,
personal (`choir.core.memory.access` says what each allows); `role` is read or read-write.
An entry for the agent's own memory narrows its role, and `encrypted` seals its personal or
app memory at rest under a key the operator supplies at each start (`choir.daemon.memory.keys`).
Leaving `memories` out keeps the behaviour before classes (every other agent's knowledge and
app memory readable); a list, even empty, makes another agent's memory reachable only as
listed. Read by choird at each call: a changed list applies to the next memory call.

    "relevance": {"bm25": 0.3, "semantic": 0.3, "temporal": 0.3, "importance": 0.1}

Each relevance weight is 0 to 1; they need not sum to 1 (only the order of results counts), but
at least one must count. Hot-reloaded: the next search uses them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from choir.config.base import ConfigModel
from choir.config.names import AgentId
from choir.core.memory.access import Grant, MemoryClass, Role
from choir.core.memory.knowledge.relevance import RelevanceWeights

_DEFAULT = RelevanceWeights()
Weight = Annotated[float, Field(ge=0.0, le=1.0)]


class MemoryEntry(ConfigModel):
    """One attached memory."""

    agent: AgentId | None = None
    """The agent that owns the memory; absent: this agent."""
    memory_class: Literal["system", "knowledge", "app", "personal"] = Field(alias="class")
    """system, knowledge, app or personal."""
    role: Literal["read", "read-write"] = "read"
    """read, or read-write."""
    encrypted: bool = False
    """Seal the memory's content and data at rest with AES-256-GCM (own personal or app memory
    only); its key is supplied at each start (`choirctl agent start --memory-key-file`)."""

    def grant(self, owner: str) -> Grant:
        """The entry as `choir.core.memory.access` reads it (`owner`: the agent it is under)."""
        return Grant(
            self.agent or owner, MemoryClass(self.memory_class), Role(self.role), self.encrypted
        )


class RelevanceConfig(ConfigModel):
    """`choir.memory.query` mode `relevance`: how much each signal counts."""

    bm25: Weight = _DEFAULT.bm25
    """BM25 over name and content, relative to the best match (0-1)."""
    semantic: Weight = _DEFAULT.semantic
    """Cosine similarity of the item's vector to the query's (0-1; 0 without vectors)."""
    temporal: Weight = _DEFAULT.temporal
    """e^(-0.05 * days since last access) * (1 + 0.02 * access count)."""
    importance: Weight = _DEFAULT.importance
    """By kind: correction 0.9, preference 0.8, fact 0.6, task 0.5."""

    @model_validator(mode="after")
    def _one_counts(self) -> RelevanceConfig:
        if self.bm25 + self.semantic + self.temporal + self.importance <= 0:
            raise ValueError(
                "relevance weights are all 0: give at least one of bm25, semantic, temporal, "
                "importance a weight above 0"
            )
        return self

    def weights(self) -> RelevanceWeights:
        return RelevanceWeights(self.bm25, self.semantic, self.temporal, self.importance)
