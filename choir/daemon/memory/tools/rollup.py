"""`choir.memory.rollup`: the session summaries edge's idle roll-up is to cover (design 004).

A host tool the agent calls itself while edge is idle (`choir.agent.lanes.rollup`), never
offered to the model: `{"limit": n, "besides": [names]}` answers the agent's session summaries
no stored roll-up covers yet, oldest first, but `besides` (those the agent's own log rolled up
already: a roll-up durable but not stored yet is not written twice). Only the summaries of the
calling session's user (its bound DM), or when it has none pending those of sessions with no
user (which every session of the agent reads anyway): one roll-up is over one user's sessions
and is stored as that user's, so no user's conversations reach another user's session. A
user's summaries are rolled up by the agent's sessions with that user. choird only reads here;
the roll-up itself is the agent's model's, committed as a `memory_rollup` event and stored by
choird when durable (`archives.ArchiveWriter`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from choir.core.memory.summaries.rollup import MAX_COVERED
from choir.daemon.agents.host_tools import HostToolCall
from choir.errors import ChoirError
from choir.protocol import ToolResult

if TYPE_CHECKING:
    from choir.daemon.memory.store import MemoryStore

ROLLUP: Final = "choir.memory.rollup"
BESIDES_MAX: Final = 1_000
"""Most names `besides` may hold (a session rolls up far fewer)."""


@dataclass(frozen=True)
class RollupSources:
    """The handler of `choir.memory.rollup`."""

    parts: Callable[[], Awaitable[tuple[MemoryStore, object]]]
    """The store, once choird's memory has started (`tools.MemoryParts`)."""

    async def __call__(self, call: HostToolCall) -> ToolResult:
        try:
            limit, besides = _arguments(call.input)
        except ValueError as bad:
            return ToolResult.fail("invalid_input", str(bad))
        try:
            store, _ = await self.parts()
            pending = await store.pending_summaries(
                call.context.agent_id, limit, user=call.context.bindings.dm or "", besides=besides
            )
        except ChoirError as error:
            return ToolResult.fail("unavailable", error.message)
        return ToolResult.ok(
            f"{len(pending)} session summaries to roll up",
            summaries=[{"name": p.name, "text": p.text} for p in pending],
        )


def _arguments(args: Mapping[str, Any]) -> tuple[int, list[str]]:
    limit = args.get("limit", MAX_COVERED)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_COVERED:
        raise ValueError(f"limit must be an integer from 1 to {MAX_COVERED}")
    besides = args.get("besides", [])
    if (
        not isinstance(besides, list)
        or len(besides) > BESIDES_MAX
        or not all(isinstance(name, str) for name in besides)
    ):
        raise ValueError(f"besides must be a list of at most {BESIDES_MAX} summary names")
    return limit, besides
