"""The host uid each agent's container runs as when choird is root (pure).

Never uid 0: a root agent could leave a root-owned setuid file in its workspace for any local
user to run. One uid per agent, in config.json `container.agent_uid_base` … `+ 65535`:
its slot is a hash of the agent id, so an agent keeps its uid as others come and go; two ids
hashing to one slot are resolved by probing in sorted order (unique uids for any config). The
gid is the uid (a group of its own). A uid that does change is harmless: at start, choird hands
the workspace over to whichever uid runs it.

    agent_uids(["agent-1", "agent-2"], base=2_000_000_000, span=65536)  # {"agent-1": 20000…}
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def agent_uids(agent_ids: Iterable[str], base: int, span: int) -> dict[str, int]:
    """Every agent's uid: distinct, each in `base` … `base + span - 1`."""
    ids = sorted(set(agent_ids))
    if len(ids) > span:
        raise ValueError(f"{len(ids)} agents do not fit in {span} uids")
    taken: set[int] = set()
    uids: dict[str, int] = {}
    for agent_id in ids:
        slot = _slot(agent_id, span)
        while slot in taken:
            slot = (slot + 1) % span
        taken.add(slot)
        uids[agent_id] = base + slot
    return uids


def _slot(agent_id: str, span: int) -> int:
    digest = hashlib.sha256(agent_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % span
