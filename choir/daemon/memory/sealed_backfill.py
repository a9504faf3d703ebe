"""Items written in the clear before their memory was marked encrypted, sealed when choird holds
the key (seed design 003): at every keyed `agent start`, after the key is checked.

    counts = await seal_written_before(pool, "ada", config.agents["ada"], key)  # {"personal": 2}
    sealed_notes("ada", counts)  # ["sealed 2 items of ada/personal written before it was ..."]

Marking a memory `encrypted` promises that what it holds is sealed, not only what is written
after: each such item's text and data, every version of it, and no vector of it. Sealed in one
transaction per agent (`choir.store.knowledge.plaintext`): a start killed midway seals nothing,
and the next keyed start seals it all; a start after that finds nothing in the clear.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from choir.core.memory.sealed_items import seal_existing
from choir.core.memory.sealing import NONCE_BYTES
from choir.daemon.memory.keys import encrypted_classes
from choir.store.agent_schema import run_as_agent
from choir.store.knowledge.plaintext import seal_plaintext

if TYPE_CHECKING:
    from choir.config.model import AgentConfig
    from choir.store.postgres.pool import Pool


async def seal_written_before(
    pool: Pool, agent: str, config: AgentConfig | None, key: bytes
) -> dict[str, int]:
    """Seal with `key` every item of `agent`'s encrypted memories still in the clear; how many
    items of each memory were."""
    classes = sorted(c.value for c in encrypted_classes(agent, config))
    if not classes:
        return {}

    def sealer(memory_class: str, text: str, data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        nonce = secrets.token_bytes(NONCE_BYTES)
        return seal_existing(key, agent, memory_class, text, data, nonce=nonce)

    async with pool.acquire() as conn, run_as_agent(conn, agent) as tx:
        return await seal_plaintext(tx, classes, sealer)


def sealed_notes(agent: str, counts: Mapping[str, int]) -> list[str]:
    """What the start tells the operator (and choird's log) of the items it sealed."""
    return [
        f"sealed {count} item{'' if count == 1 else 's'} of {agent}/{memory_class} written "
        "before it was marked encrypted"
        for memory_class, count in sorted(counts.items())
        if count
    ]
