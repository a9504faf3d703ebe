"""Operator curation with `choirctl memory about|forget` (the real CLI in a subprocess, a real
choird on real Postgres): what an agent learnt from a user, by DM name or gateway user id;
forgetting removes the item, its names, versions, vector and edges from Postgres and the BM25
index at once, and records who forgot it; without a terminal `--yes` is required."""

from __future__ import annotations

from uuid import UUID

from choir.core.memory.knowledge.graph import EdgeType
from choir.core.memory.knowledge.provenance import Provenance
from choir.daemon.memory.search.query import MemoryQuery
from choir.protocol.operator.verbs import OperatorVerb

from .conftest import Filled
from .curation_support import forgets, traces
from .test_memory_choirctl import run


def from_session(user: str, call: str) -> Provenance:
    return Provenance(
        agent="agent-1", session_id="s-ops", rev=3, call_id=call, tool="choir.memory.upsert",
        user=user,
    )  # fmt: skip


async def test_what_was_learnt_from_a_user_is_listed_edited_and_forgotten(filled: Filled) -> None:
    store = filled.store
    phone = await store.put_knowledge(
        "agent-1", "the user's phone is 555-0100", name="user.phone",
        provenance=from_session("console", "c1"),
    )  # fmt: skip
    await store.put_knowledge(
        "agent-1", "the other user likes tea", name="other.tea",
        provenance=from_session("someone-else", "c2"),
    )  # fmt: skip
    await store.put_knowledge("agent-1", "standup is at 9:30", name="team.standup")
    await store.alias_knowledge("agent-1", "user.phone", "phone")
    await store.link_knowledge("agent-1", "user.phone", "team.standup", EdgeType.RELATES_TO)
    edited = await run(
        filled, "knowledge", "write", "agent-1", "phone", "the user's phone is 555-0199"
    )
    before = await store.search(
        "agent-1", MemoryQuery(store="knowledge", mode="text", text="phone 0199", limit=5)
    )  # builds the agent's BM25 index, with the phone in it
    about = await run(filled, "memory", "about", "agent-1", "console")
    about_json = (await run(filled, "memory", "about", "agent-1", "console", "--json")).json()
    refused = await run(filled, "memory", "forget", "agent-1", "phone")
    kept = await traces(filled.daemon.database.pool, "agent-1", phone.id)  # type: ignore[union-attr]
    forgot = await run(filled, "memory", "forget", "agent-1", "phone", "--yes")
    gone = await traces(filled.daemon.database.pool, "agent-1", phone.id)  # type: ignore[union-attr]
    after = await store.search(
        "agent-1", MemoryQuery(store="knowledge", mode="text", text="phone 0199", limit=5)
    )
    again = await run(filled, "memory", "forget", "agent-1", "phone", "--yes")
    recorded = await forgets(filled.daemon.database.pool, "agent-1")  # type: ignore[union-attr]
    about_after = (await run(filled, "memory", "about", "agent-1", "console", "--json")).json()

    assert edited.code == 0, edited.err
    assert about.code == 0, about.err
    assert about.out.startswith("agent-1 learnt 1 item(s) from console\n")
    assert "user.phone" in about.out
    assert [item["name"] for item in about_json["items"]] == ["user.phone"]  # rewritten since
    assert about_json["items"][0]["provenance"] == {"by": "choirctl"}  # the newest version's
    assert [hit.source.id for hit in before] == [phone.id]
    assert refused.code == 2
    assert refused.err.strip() == (
        "error: memory forget removes phone and its versions for good: pass --yes to confirm"
    )
    assert kept == {
        "documents": 1,
        "names": 2,
        "versions": 2,
        "vectors": 1,
        "edges": 1,
        "forgotten": 0,
    }
    assert forgot.code == 0, forgot.err
    assert forgot.out == (
        f"forgot phone ({phone.id}) from agent-1's memory: 2 version(s) removed; recorded as "
        "forgotten by choirctl\n"
    )
    assert gone == {
        "documents": 0,
        "names": 0,
        "versions": 0,
        "vectors": 0,
        "edges": 0,
        "forgotten": 1,
    }
    assert after == []
    assert again.code == 4
    assert len(again.err.strip().splitlines()) == 1
    assert recorded == [{"document_id": phone.id, "by": "choirctl", "versions": 2}]
    assert about_after["items"] == []


async def test_a_user_is_named_by_dm_or_gateway_id_and_the_console_records_itself(
    filled: Filled,
) -> None:
    dm = filled.daemon.services.stage.running.config.dms["console"]  # type: ignore[union-attr]
    item = await filled.store.put_knowledge(
        "agent-1", "prefers metric units", name="units", provenance=from_session("console", "c3")
    )
    by_id = (await run(filled, "memory", "about", "agent-1", dm.user_id, "--json")).json()
    nobody = await run(filled, "memory", "about", "agent-1", "nobody")
    unknown_agent = await run(filled, "memory", "about", "agent-9", "console")
    answer = await filled.client.call(
        OperatorVerb.MEMORY_FORGET, agent_id="agent-1", ref="units", by="choir tui"
    )

    assert by_id["user"] == "console"
    assert [i["name"] for i in by_id["items"]] == ["units"]
    assert nobody.out == "agent-1 learnt 0 item(s) from nobody\n"
    assert unknown_agent.code == 4
    assert (answer["by"], answer["id"]) == ("choir tui", str(item.id))
    assert UUID(answer["id"]) == item.id
