"""The embedding queue's ids of memory rows, `<target>/<agent>/<row>`: which agent's row a
vector (and an embedding call's usage) belongs to (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:  # memory_vectors loads numpy: not at choird's start
    from choir.store.memory.vectors import VectorTarget


def chunk_id(agent_id: str, target: VectorTarget, row_id: UUID) -> str:
    """The embedding queue's id of a memory row."""
    return f"{target}/{agent_id}/{row_id}"


def parse_chunk_id(value: str) -> tuple[str, VectorTarget, UUID] | None:
    """(agent, target, row) of a `chunk_id`; None for an id this index did not make."""
    from choir.store.memory.vectors import VECTOR_TARGETS

    target, _, rest = value.partition("/")
    agent_id, _, row = rest.rpartition("/")
    if target not in VECTOR_TARGETS or not agent_id:
        return None
    try:
        return agent_id, target, UUID(row)
    except ValueError:
        return None


def owner_of(value: str) -> str | None:
    """The agent whose row a chunk id names; None for an id the index did not make."""
    parsed = parse_chunk_id(value)
    return parsed[0] if parsed is not None else None


__all__ = ["chunk_id", "owner_of", "parse_chunk_id"]
