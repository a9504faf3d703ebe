"""The embedding section's cross-field rules (§11.9): one `embedding.<field>: …` line each.

The local model has one size and needs nothing to reach it; an OpenAI-compatible provider needs
a base URL (known for openrouter and openai) and, for those two, a key. Whether the named secret
is set is checked with every other secret (a warning: the file is usable, embedding is not).
"""

from __future__ import annotations

from choir.config.model import ChoirConfig
from choir.config.resources import (
    KNOWN_EMBEDDING_ENDPOINTS,
    LOCAL_EMBEDDING_DIMENSIONS,
    MAX_INDEXED_DIMENSIONS,
    EmbeddingConfig,
)


def embedding_problems(config: ChoirConfig) -> list[str]:
    embedding = config.embedding
    problems = _local(embedding) if embedding.local else _remote(embedding)
    if embedding.vector_dimensions > MAX_INDEXED_DIMENSIONS:
        problems.append(
            f"embedding.dimensions: at most {MAX_INDEXED_DIMENSIONS} (pgvector's HNSW index "
            f"limit), got {embedding.vector_dimensions}; choose a smaller model or size"
        )
    return problems


def _local(embedding: EmbeddingConfig) -> list[str]:
    problems = []
    if embedding.dimensions not in (None, LOCAL_EMBEDDING_DIMENSIONS):
        problems.append(
            f"embedding.dimensions: the local model makes {LOCAL_EMBEDDING_DIMENSIONS}-dimension "
            f"vectors, got {embedding.dimensions}; remove dimensions (or set another provider)"
        )
    for field in ("model", "endpoint", "secret"):
        if getattr(embedding, field) is not None:
            problems.append(
                f"embedding.{field}: not used by the local provider; remove it, or set "
                "provider to an OpenAI-compatible one (openrouter, openai, or any with an endpoint)"
            )
    return problems


def _remote(embedding: EmbeddingConfig) -> list[str]:
    provider = embedding.provider
    problems = []
    if embedding.base_url is None:
        known = ", ".join(sorted(KNOWN_EMBEDDING_ENDPOINTS))
        problems.append(
            f"embedding.endpoint: required for provider {provider!r} (the base URL of its "
            f"OpenAI-compatible API; only {known} have a default)"
        )
    if provider in KNOWN_EMBEDDING_ENDPOINTS and embedding.secret is None:
        problems.append(
            f"embedding.secret: required for provider {provider!r}: name the secret holding its "
            "API key (choirctl secret set <name>)"
        )
    return problems
