"""config.json `relevance`: the weights of knowledge relevance search (design 004's formula).

    "relevance": {"bm25": 0.3, "semantic": 0.3, "temporal": 0.3, "importance": 0.1}

Each weight is 0 to 1; they need not sum to 1 (only the order of results counts), but at least
one must count. Hot-reloaded: the next search uses them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from choir.config.base import ConfigModel
from choir.core.memory.knowledge.relevance import RelevanceWeights

_DEFAULT = RelevanceWeights()
Weight = Annotated[float, Field(ge=0.0, le=1.0)]


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
