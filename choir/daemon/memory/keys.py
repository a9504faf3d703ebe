"""The keys of encrypted memories, held in choird's memory only (seed design 003).

    key = await checked_key(pool, "ada", config.agents["ada"], raw)  # or WrongMemoryKey …
    keys.hold("ada", key)                                             # MemoryKeys, choird's
    keys.key("ada")                                                   # bytes, or None: locked

The operator supplies an agent's key when it starts it (`choirctl agent start …
--memory-key-file`); choird checks it against the key check recorded at the first start
(`memory_key_checks`) and keeps it here, never on disk, in the environment or a log. It is
gone when the agent is stopped or choird exits: the memory is then locked — its items listed,
never opened, nothing written to it — until a start supplies the key again. One key per agent
opens each of its memories marked `encrypted` (each value is bound to its own memory).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from choir.core.memory.access import MemoryClass
from choir.core.memory.sealing import key_check, parse_key, verify_key
from choir.errors import UsageError
from choir.failpoints import failpoint
from choir.store.agent_schema import run_as_agent
from choir.store.memory import key_checks as memory_key_checks

if TYPE_CHECKING:
    from choir.config.model import AgentConfig
    from choir.store.postgres.pool import Pool


class MemoryLocked(UsageError):
    """A read or write that needs an encrypted memory's key, which choird does not hold."""


def encrypted_classes(agent: str, config: AgentConfig | None) -> frozenset[MemoryClass]:
    """The classes of `agent`'s own memory marked `encrypted` in config.json (`config`)."""
    if config is None or config.memories is None:
        return frozenset()
    return frozenset(
        MemoryClass(entry.memory_class)
        for entry in config.memories
        if entry.encrypted and entry.agent in (None, agent)
    )


def locked_message(agent: str, memory_class: str) -> str:
    return (
        f"memory {agent}/{memory_class} is encrypted and locked: choird holds no key for it "
        f"(it keeps none across a restart); start the agent with "
        f"choirctl agent start {agent} --memory-key-file PATH"
    )


@dataclass
class MemoryKeys:
    """The keys choird holds, by agent."""

    _keys: dict[str, bytes] = field(default_factory=dict, repr=False)

    def key(self, agent: str) -> bytes | None:
        return self._keys.get(agent)

    def hold(self, agent: str, key: bytes) -> None:
        self._keys[agent] = key

    def forget(self, agent: str) -> None:
        self._keys.pop(agent, None)


async def checked_key(pool: Pool, agent: str, config: AgentConfig | None, raw: bytes) -> bytes:
    """The key in `raw` once it opens every encrypted memory of `agent`: checked against the
    recorded checks, and the missing ones recorded (the first start with a key). A bad or
    wrong key, or an agent with no encrypted memory, is refused with nothing recorded."""
    classes = encrypted_classes(agent, config)
    if not classes:
        raise UsageError(
            f"agent {agent} has no encrypted memory: drop --memory-key-file, or mark a memory "
            f'encrypted in agents.{agent}.memories ({{"class": "personal", "role": '
            '"read-write", "encrypted": true})'
        )
    key = parse_key(raw)
    async with pool.acquire() as conn, run_as_agent(conn, agent) as tx:
        recorded = await memory_key_checks.key_checks(tx)
        for memory_class in sorted(classes):
            check = recorded.get(memory_class.value)
            if check is not None:
                verify_key(key, check, f"memory {agent}/{memory_class.value}")
        await memory_key_checks.record_key_checks(
            tx, {c.value: key_check(key) for c in classes if c.value not in recorded}
        )
        await failpoint("memory.key.after_record")  # recorded, not committed, nothing running
    return key


def classes_of(agents: Mapping[str, AgentConfig], agent: str) -> frozenset[MemoryClass]:
    """`encrypted_classes` of `agent` among the configured `agents`."""
    return encrypted_classes(agent, agents.get(agent))
