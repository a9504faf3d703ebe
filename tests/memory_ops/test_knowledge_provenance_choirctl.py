"""Provenance as the operator sees it with `choirctl knowledge` (the real CLI in a subprocess,
a real choird): an operator's write names its front end on every version, `--kind` sets the
item's importance, an item stored without provenance (as before it was kept) says "source
unknown", and `source` on an unknown item is a one-line error with exit 4."""

from __future__ import annotations

from choir.protocol.operator.verbs import OperatorVerb
from choir.store.agent_schema import run_as_agent

from .conftest import Filled
from .test_memory_choirctl import run


async def test_operator_writes_record_their_front_end(filled: Filled) -> None:
    put = await run(
        filled, "knowledge", "put", "agent-1", "standups are at 9:30", "--name", "team.standup",
        "--kind", "preference",
    )  # fmt: skip
    await filled.client.call(
        OperatorVerb.KNOWLEDGE_WRITE,
        agent_id="agent-1",
        ref="team.standup",
        text="standups are at 10:00",
        by="choir tui",
    )
    shown = await run(filled, "knowledge", "show", "agent-1", "team.standup")
    shown_json = (
        await run(filled, "knowledge", "show", "agent-1", "team.standup", "--json")
    ).json()
    history = (
        await run(filled, "knowledge", "history", "agent-1", "team.standup", "--json")
    ).json()
    source = await run(filled, "knowledge", "source", "agent-1", "team.standup")
    source_json = (
        await run(filled, "knowledge", "source", "agent-1", "team.standup", "--json")
    ).json()

    assert put.code == 0, put.err
    assert "source    operator via choir tui" in shown.out
    assert shown_json["provenance"] == {"by": "choir tui"}
    assert [v["provenance"] for v in history["versions"]] == [
        {"by": "choir tui"},
        {"by": "choirctl"},
    ]
    assert source.out == (
        "team.standup (knowledge of agent-1): written by the operator via choir tui: no session "
        "events\n"
    )
    assert source_json["events"] == []
    assert filled.daemon.database is not None
    pool = filled.daemon.database.pool
    async with pool.acquire() as conn, run_as_agent(conn, "agent-1") as agent:
        kind = await agent.fetchval(
            "SELECT kind FROM knowledge_documents WHERE name = 'team.standup'"
        )
    assert kind == "preference"


async def test_an_item_from_before_provenance_says_source_unknown(filled: Filled) -> None:
    await filled.store.put_knowledge("agent-1", "the wiki moved to notion", name="wiki")

    shown = await run(filled, "knowledge", "show", "agent-1", "wiki")
    shown_json = (await run(filled, "knowledge", "show", "agent-1", "wiki", "--json")).json()
    source = await run(filled, "knowledge", "source", "agent-1", "wiki")
    missing = await run(filled, "knowledge", "source", "agent-1", "no.such.item")
    bad_kind = await run(filled, "knowledge", "write", "agent-1", "wiki", "--kind", "rumour")

    assert "source    source unknown" in shown.out
    assert "provenance" not in shown_json
    assert source.out.startswith("wiki (knowledge of agent-1): source unknown")
    assert (missing.code, missing.out) == (4, "")
    assert "no knowledge item 'no.such.item'" in missing.err
    assert len(missing.err.splitlines()) == 1
    assert bad_kind.code == 2
    assert "rumour" in bad_kind.err
