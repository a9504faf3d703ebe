"""The Memory tab's `d` against a real choird with a summary tree grown by real sessions: a
roll-up expands to its summary, the summary to its archive, the archive to the session messages
it covers, each a row `d` takes further; an item outside the tree and a message row say why
nothing is below them."""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from tests.memory_ops.summary_tree import grow_tree
from tests.tui.actions.conftest import notes
from tests.tui.conftest import Live, column
from tests.tui.pilot import console, show_tab, until
from tui.views.memory import MemoryView


def shown(app: Any, widget_id: str) -> str:
    return str(app.query_one(f"#{widget_id}", Static).content)


async def test_d_expands_a_rollup_down_to_its_messages(live: Live) -> None:
    tree = await grow_tree(live.daemon)
    await live.client.knowledge_put("agent-1", "the office wifi is choir-guest", name="wifi")
    async with console(live.home) as (app, pilot):
        app.select_agent("agent-1")
        await show_tab(pilot, "memory")
        view = app.query_one(MemoryView)

        await pilot.press("k")
        await until(pilot, lambda: "knowledge item(s)" in shown(app, "memory-what"))
        names = [row[2].split(" ", 1)[0] for row in view.rows]
        view.table.move_cursor(row=names.index(tree.root))
        await pilot.press("d")
        await until(pilot, lambda: f"{tree.root} (rollup)" in shown(app, "memory-what"))
        assert "1 source(s); d expands one" in shown(app, "memory-what")
        assert [f.split(" ", 1)[0] for f in column(app, "memory-results", "from")] == [tree.branch]
        assert "Across sessions: the deploy script." in shown(app, "memory-detail")

        await pilot.press("d")  # the summary: its archive
        await until(pilot, lambda: f"{tree.branch} (summary)" in shown(app, "memory-what"))
        assert [f.split(" ", 1)[0] for f in column(app, "memory-results", "from")] == [tree.archive]

        await pilot.press("d")  # the archive: the session's messages over its revs
        await until(pilot, lambda: f"of {tree.archive} (session" in shown(app, "memory-what"))
        what = shown(app, "memory-what")
        assert f"(session {tree.session_id}, revs 1-8); the end" in what
        revs = [int(rev.removeprefix("rev ")) for rev in column(app, "memory-results", "score")]
        assert revs
        assert revs == sorted(revs)
        assert revs[-1] <= 8
        await pilot.press("enter")  # a message opens below
        await until(pilot, lambda: shown(app, "memory-detail").startswith("user"))

        await pilot.press("d")  # a message: nothing below it
        await until(pilot, lambda: any("nothing below it" in m for _, m in notes(app)))

        await pilot.press("k")
        await until(pilot, lambda: "knowledge item(s)" in shown(app, "memory-what"))
        names = [row[2].split(" ", 1)[0] for row in view.rows]
        view.table.move_cursor(row=names.index("wifi"))
        await pilot.press("d")
        await until(pilot, lambda: any("not part of the summary tree" in m for _, m in notes(app)))
        assert (
            "error",
            "'wifi' is not part of the summary tree: expand a roll-up (rollup/…), "
            "a session summary (summary/…), a compaction archive (archive/…) or a tool leaf "
            "(tools/…) (choirctl knowledge show agent-1 wifi shows its edges)",
        ) in notes(app)
        assert "knowledge item(s)" in shown(app, "memory-what")  # the rows stay


async def test_d_and_e_on_a_session_hit_browse_its_session(live: Live) -> None:
    """Before: a session hit (a chunk of messages, not a knowledge item) answered `d` with "no
    knowledge item"; below a chunk are its session's messages."""
    tree = await grow_tree(live.daemon)
    async with console(live.home) as (app, pilot):
        app.select_agent("agent-1")
        await show_tab(pilot, "memory")
        view = app.query_one(MemoryView)
        for key in ("d", "e"):
            await pilot.press("slash", *"deploy script", "enter")
            await until(pilot, lambda: "hit(s) for 'deploy script'" in shown(app, "memory-what"))
            sessions = [view.hit_sessions.get(row[0]) for row in view.rows]
            view.table.move_cursor(row=sessions.index(tree.session_id))
            await pilot.press(key)
            await until(
                pilot,
                lambda: f"of agent-1's session {tree.session_id}" in shown(app, "memory-what"),
                what=f"{key}: the session's messages",
            )
            assert not [m for level, m in notes(app) if level == "error"]
            assert column(app, "memory-results", "score")[0].startswith("rev ")
