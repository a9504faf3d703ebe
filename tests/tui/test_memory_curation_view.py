"""The Memory tab's curation against a real choird: `e` opens a knowledge item's source, `a`
lists what the agent learnt from a user, `x` forgets the highlighted item once confirmed
(recorded as the console's), `v` browses a session's messages a page at a time."""

from __future__ import annotations

from typing import Any

from textual.widgets import Input, Static

from choir.core.memory.knowledge.provenance import Provenance
from tests.harness.memory import fill_memory, memory_store
from tests.memory_ops.curation_support import forgets
from tests.tui.actions.conftest import confirmation, notes
from tests.tui.actions.test_actions_palette import prompt
from tests.tui.conftest import Live, column
from tests.tui.pilot import console, show_tab, until
from tui.views.memory import MemoryView


def shown(app: Any, widget_id: str) -> str:
    return str(app.query_one(f"#{widget_id}", Static).content)


async def test_source_about_forget_and_browse(live: Live) -> None:
    session_id, _ = await fill_memory(live.daemon)
    store = memory_store(live.daemon)
    learnt = Provenance(
        agent="agent-1", session_id=session_id, rev=2, call_id="c9",
        tool="choir.memory.upsert", user="console",
    )  # fmt: skip
    phone = await store.put_knowledge(
        "agent-1", "the user's phone is 555-0100", name="user.phone", provenance=learnt
    )
    await live.client.knowledge_put("agent-1", "the office wifi is choir-guest", name="wifi")
    async with console(live.home) as (app, pilot):
        app.select_agent("agent-1")
        await show_tab(pilot, "memory")
        view = app.query_one(MemoryView)

        await pilot.press("k")
        await until(pilot, lambda: "2 knowledge item(s)" in shown(app, "memory-what"))
        await pilot.press("down", "e")  # the wifi: the operator's
        await until(pilot, lambda: "source of wifi" in shown(app, "memory-detail"))
        assert "written by the operator via choirctl" in shown(app, "memory-detail")

        await pilot.press("a")
        await prompt(pilot)
        await pilot.press(*"console", "enter")
        await until(pilot, lambda: "learnt from console" in shown(app, "memory-what"))
        assert [row.value for row in view.table.rows] == [str(phone.id)]

        await pilot.press("x")
        dialog = await confirmation(pilot)
        assert "Forget user.phone" in dialog.question
        await pilot.press("y")
        await until(
            pilot,
            lambda: any(t.startswith("forgot user.phone") for _, t in notes(app)),
            what="the notice",
        )
        assert next(t for _, t in notes(app) if t.startswith("forgot")).endswith("(1 version(s))")
        assert list(view.table.rows) == []

        await pilot.press("v")
        asked = await prompt(pilot)
        asked.query_one(Input).value = session_id
        await pilot.press("enter")
        await until(pilot, lambda: "message(s) of agent-1's session" in shown(app, "memory-what"))
        assert column(app, "memory-results", "text")[0] == "memory event 1"
        assert "the end" in shown(app, "memory-what")
        await pilot.press("enter")
        await until(pilot, lambda: "memory event 1" in shown(app, "memory-detail"))

    forgotten = await live.client.memory_about("agent-1", "console")
    assert forgotten.items == []
    assert live.daemon.database is not None
    recorded = await forgets(live.daemon.database.pool, "agent-1")
    assert [(r["document_id"], r["by"]) for r in recorded] == [(phone.id, "choir tui")]
