"""Whether an agent may read a memory: the one rule every automatic read goes through.

Today an agent reads only its own memory without asking (another agent's is read through
`choir.memory.query`'s `target_agent`, an explicit choice of the model). Memory classes with
read roles (issue 15, design 003) decide here once they exist: relevant context (design 004,
`daemon.memory.recall`) puts in a prompt only what this says the agent may read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the search's module imports numpy: choird loads it with memory's first use
    from choir.store.memory.search import HitSource


def may_read(reader: str, source: HitSource) -> bool:
    """Whether agent `reader` may read the memory `source` comes from."""
    return source.agent_id == reader
