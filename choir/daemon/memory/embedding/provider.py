"""The interface every embedder meets (§11.9), so the store never knows which one it has.

    vectors = await provider.embed(["the cat sat on the mat", ...])

A provider answers one vector per text, in order, each of exactly `dimensions` float32 values, or
raises `EmbeddingError`. It never answers part of a batch: the store writes a vector only when it
is sure which text it belongs to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeAlias

import numpy as np
import numpy.typing as npt

Vector: TypeAlias = npt.NDArray[np.float32]
"""One embedding: a 1-D float32 array (pgvector's asyncpg codec takes it as is)."""


class EmbeddingProvider(Protocol):
    """Turns texts into vectors of a fixed size."""

    @property
    def name(self) -> str:
        """Who embeds, for logs and `memory stats`: `local`, or the configured model's name."""
        ...

    @property
    def dimensions(self) -> int:
        """The size of every vector; the pgvector column is `vector(dimensions)`."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order; `EmbeddingError` for every way it can fail."""
        ...


async def embed_counted(
    provider: EmbeddingProvider, texts: Sequence[str]
) -> tuple[list[Vector], int | None]:
    """`provider.embed(texts)` and the input tokens the provider reported (None: it reports
    none, as the local model); a provider that counts has `embed_counted` of its own."""
    counted = getattr(provider, "embed_counted", None)
    if counted is None:
        return await provider.embed(texts), None
    vectors, tokens = await counted(texts)
    return vectors, tokens
