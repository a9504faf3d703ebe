"""config.json `agents.<id>.memories`: the memories an agent attaches, each with a role.

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
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from choir.config.base import ConfigModel
from choir.config.names import AgentId
from choir.core.memory.access import Grant, MemoryClass, Role


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
