"""The one place choird checks memory access: every `choir.memory.query` and
`choir.memory.upsert` (and nothing else) asks here before it reads or writes.

    gate = MemoryGate(lambda: config.agents)
    gate.check("ada", "bob", MemoryClass.APP, Op.WRITE, user="tg-alice")  # or MemoryAccessDenied
    scope = gate.scope("ada", "bob", user="tg-alice")  # what a search of bob's knowledge covers

The decision is `choir.core.memory.access` (pure); this reads the agents' `memories` entries
from the running config at each call, so a changed config.json applies to the next call. The
user of a call is its session's bound DM (`ResourceBindings.dm`): personal memory is per DM.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from choir.core.memory.access import (
    MemoryAccess,
    MemoryClass,
    Op,
    Viewer,
    readable,
    refusal,
    session_refusal,
    viewer,
)
from choir.core.memory.knowledge.graph import MemoryScope
from choir.errors import UsageError

if TYPE_CHECKING:
    from choir.config.model import AgentConfig


class MemoryAccessDenied(UsageError):
    """A read or write the caller's memory classes and roles do not allow (the tool error
    `access_denied`, one line naming the memory, its class and role and what would allow it)."""


@dataclass(frozen=True)
class MemoryGate:
    agents: Callable[[], Mapping[str, AgentConfig]]
    """The configured agents, as running now."""

    def access(self, agent: str) -> MemoryAccess:
        config = self.agents().get(agent)
        entries = None if config is None else config.memories
        if entries is None:
            return MemoryAccess(agent)
        return MemoryAccess(agent, tuple(entry.grant(agent) for entry in entries))

    def check(
        self, caller: str, target: str, memory_class: MemoryClass, op: Op, *, user: str | None
    ) -> None:
        """Return if `caller` may `op` `target`'s memory of `memory_class`; else refuse."""
        refused = refusal(self.access(caller), target, memory_class, op, user=user)
        if refused is not None:
            raise MemoryAccessDenied(refused)

    def check_session(self, caller: str, target: str) -> None:
        """Return if `caller` may read `target`'s session memory; else refuse."""
        refused = session_refusal(self.access(caller), target)
        if refused is not None:
            raise MemoryAccessDenied(refused)

    def scope(self, caller: str, target: str, *, user: str | None) -> MemoryScope:
        """The memories of `target` a knowledge read by `caller` covers; none is a refusal
        (naming the knowledge memory: the one a caller most likely meant)."""
        classes = readable(self.access(caller), target, user=user)
        if not classes:
            self.check(caller, target, MemoryClass.KNOWLEDGE, Op.READ, user=user)
        return MemoryScope(tuple(c.value for c in classes), self.viewer(caller, target, user).user)

    def viewer(self, caller: str, target: str, user: str | None) -> Viewer:
        """Whose items of `target`'s memory a session of `user` of `caller` sees (an item with
        an owner: its own agent's session of that user only)."""
        return viewer(caller, target, user)

    def visible(
        self, caller: str, target: str, memory_class: str, owner: str, user: str | None
    ) -> bool:
        """Whether an item of `target`'s memory (its class and owner) exists for `caller`: an
        item of another user (personal, or derived from that user's session) is not there at
        all, as far as the caller can tell."""
        del memory_class  # a personal item always has an owner: the owner decides
        return self.viewer(caller, target, user).sees(owner)
