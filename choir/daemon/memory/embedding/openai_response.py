"""Checking an OpenAI-compatible `/v1/embeddings` answer before any of it is stored (pure).

A vector of the wrong size would corrupt the pgvector column; a missing, repeated or non-numeric
item would put one text's vector on another. So the whole answer is refused unless it holds
exactly one finite vector of `dimensions` numbers for every text sent, identified by `index`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from choir.daemon.memory.embedding.errors import EmbeddingError, EmbeddingErrorKind
from choir.daemon.memory.embedding.provider import Vector


def request_body(model: str, texts: list[str]) -> dict[str, Any]:
    """The POST body for `texts`; floats, not base64, so every value can be checked."""
    return {"model": model, "input": texts, "encoding_format": "float"}


def parse_embeddings(data: Any, count: int, dimensions: int, name: str) -> list[Vector]:
    """The `count` vectors of a decoded answer, ordered by `index`; EmbeddingError otherwise."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise _malformed(name, "it has no `data` list")
    if len(items) != count:
        raise _malformed(name, f"it holds {len(items)} embeddings for {count} texts")
    vectors: list[Vector | None] = [None] * count
    for position, item in enumerate(items):
        index = _index(item, position, count, name)
        if vectors[index] is not None:
            raise _malformed(name, f"index {index} appears twice")
        vectors[index] = _vector(item, index, dimensions, name)
    return [v for v in vectors if v is not None]


def reported_tokens(data: Any) -> int | None:
    """`usage.prompt_tokens` of a decoded answer (what the provider bills), None when absent."""
    usage = data.get("usage") if isinstance(data, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return tokens if type(tokens) is int and tokens >= 0 else None


def _index(item: Any, position: int, count: int, name: str) -> int:
    if not isinstance(item, dict):
        raise _malformed(name, f"item {position} is not an object")
    index = item.get("index", position)
    if type(index) is not int or not 0 <= index < count:
        raise _malformed(name, f"item {position} has index {index!r}, not one of 0..{count - 1}")
    return index


def _vector(item: dict[str, Any], index: int, dimensions: int, name: str) -> Vector:
    raw = item.get("embedding")
    if not isinstance(raw, list):
        raise _malformed(name, f"embedding {index} is not a list of numbers")
    if len(raw) != dimensions:
        raise EmbeddingError(
            EmbeddingErrorKind.WRONG_DIMENSIONS,
            f"embedding model {name!r} answered vectors of {len(raw)} dimensions, not the "
            f"{dimensions} configured; set embedding.dimensions to the model's size (and "
            "re-embed), or choose a model of that size",
        )
    try:
        array = np.array(raw)
    except ValueError:  # ragged nesting
        raise _malformed(name, f"embedding {index} is not a list of numbers") from None
    if array.ndim != 1 or array.dtype.kind not in "fi":
        raise _malformed(name, f"embedding {index} is not a list of numbers")
    with np.errstate(over="ignore"):  # too large for float32 becomes inf, refused just below
        vector = array.astype(np.float32)
    if not np.isfinite(vector).all():
        raise _malformed(name, f"embedding {index} holds a value too large for float32")
    return vector


def _malformed(name: str, why: str) -> EmbeddingError:
    return EmbeddingError(
        EmbeddingErrorKind.MALFORMED,
        f"embedding model {name!r} sent an unusable answer ({why}); nothing was stored — check "
        "embedding.endpoint speaks the OpenAI /v1/embeddings protocol",
    )
