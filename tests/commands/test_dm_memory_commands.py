"""`/memory about` and `/memory forget` from a DM against a real choird and real agents: an
admin DM lists what its agent learnt from a user and forgets an item (recorded as forgotten by
that DM); a regular DM may do neither, and nothing is forgotten when it tries.

The cluster of `test_dm_commands`: agent-1 bound to `console` (admin), agent-2 to `dm-agent-2`
(regular). Items learnt from a user are written through choird's store with the provenance an
agent's tool call gives them.
"""

from __future__ import annotations

from choir.core.memory.knowledge.provenance import Provenance
from tests.harness.cluster import Cluster
from tests.harness.memory import memory_store
from tests.memory_ops.curation_support import forgets

from .test_dm_commands import cluster, command, root

__all__ = ["cluster", "root"]  # the fixtures this module uses


def learnt(agent_id: str, user: str) -> Provenance:
    return Provenance(
        agent=agent_id, session_id="s-dm", rev=3, call_id="c1", tool="choir.memory.upsert",
        user=user,
    )  # fmt: skip


async def test_an_admin_dm_lists_what_was_learnt_and_forgets_an_item(cluster: Cluster) -> None:
    client, store = cluster.client, memory_store(cluster.daemon)
    await store.put_knowledge(
        "agent-1", "the user's phone is 555-0100", name="user.phone",
        provenance=learnt("agent-1", "console"),
    )  # fmt: skip
    await store.put_knowledge("agent-1", "standup is at 9:30", name="team.standup")

    about = await command(client, "agent-1", "/memory about console")
    nobody = await command(client, "agent-1", "/memory about nobody")
    usage = await command(client, "agent-1", "/memory forget", refused=True)
    missing = await command(client, "agent-1", "/memory forget no.such", refused=True)
    forgot = await command(client, "agent-1", "/memory forget user.phone")
    after = await command(client, "agent-1", "/memory about console")
    helped = await command(client, "agent-1", "/help")

    assert about == "user.phone (knowledge): the user's phone is 555-0100"
    assert nobody == "agent-1 learnt nothing from nobody"
    assert usage == "usage: /memory forget <name>"
    assert "no.such" in missing
    assert forgot == "user.phone forgotten from agent-1's memory"
    assert after == "agent-1 learnt nothing from console"
    pool = cluster.daemon.database.pool  # type: ignore[union-attr]
    assert [row["by"] for row in await forgets(pool, "agent-1")] == ["console"]
    names = [item.name for item in (await client.knowledge_list("agent-1")).items]
    assert names == ["team.standup"]
    assert "/memory about <user>" in helped
    assert "/memory forget <name>" in helped


async def test_a_regular_dm_may_not_list_or_forget(cluster: Cluster) -> None:
    client, store = cluster.client, memory_store(cluster.daemon)
    await store.put_knowledge(
        "agent-2", "the user's phone is 555-0100", name="user.phone",
        provenance=learnt("agent-2", "dm-agent-2"),
    )  # fmt: skip

    forget = await command(client, "agent-2", "/memory forget user.phone", refused=True)
    about = await command(client, "agent-2", "/memory about dm-agent-2", refused=True)
    helped = await command(client, "agent-2", "/help")

    assert forget == "refused: /memory forget is an admin command: this DM may not run it"
    assert about == "refused: /memory about is an admin command: this DM may not run it"
    assert "/memory" not in helped
    names = [item.name for item in (await client.knowledge_list("agent-2")).items]
    assert names == ["user.phone"]
    pool = cluster.daemon.database.pool  # type: ignore[union-attr]
    assert await forgets(pool, "agent-2") == []
